// SPDX-License-Identifier: MIT
#include "hooks.h"

#include <cstddef>
#include <dlfcn.h>
#include <pthread.h>

namespace shim_test
{
std::atomic<bool> watching{false};
std::atomic<long> allocations{0};
std::atomic<long> mutex_locks{0};
} // namespace shim_test

// glibc's own entry points: the replacements forward here.
extern "C" {
void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void __libc_free(void *);
void *__libc_memalign(size_t, size_t);
}

namespace
{
inline void count_allocation()
{
	if (shim_test::watching.load(std::memory_order_relaxed))
		shim_test::allocations.fetch_add(1, std::memory_order_relaxed);
}
} // namespace

extern "C" {

void *malloc(size_t n)
{
	count_allocation();
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	count_allocation();
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	count_allocation();
	return __libc_realloc(p, n);
}

void free(void *p)
{
	__libc_free(p);
}

void *memalign(size_t align, size_t n)
{
	count_allocation();
	return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	count_allocation();
	return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	count_allocation();
	void *p = __libc_memalign(align, n);
	if (!p)
		return 12; // ENOMEM
	*out = p;
	return 0;
}

int pthread_mutex_lock(pthread_mutex_t *m)
{
	if (shim_test::watching.load(std::memory_order_relaxed))
		shim_test::mutex_locks.fetch_add(1, std::memory_order_relaxed);
	// glibc's, past this replacement; dlsym takes ld.so's internal lock,
	// not this function.
	using fn = int (*)(pthread_mutex_t *);
	static std::atomic<fn> next{nullptr};
	fn f = next.load(std::memory_order_acquire);
	if (!f) {
		f = reinterpret_cast<fn>(dlsym(RTLD_NEXT, "pthread_mutex_lock"));
		next.store(f, std::memory_order_release);
	}
	return f(m);
}

} // extern "C"
