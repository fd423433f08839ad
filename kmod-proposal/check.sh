#!/usr/bin/env bash
# check.sh: the series applies to the pinned base in order (git apply
# --check and patch --dry-run, each patch on top of the ones before it),
# every patch passes scripts/checkpatch.pl --strict from the base tree,
# every symbol the series exports has kernel-doc (scripts/kernel-doc), and
# module/ passes checkpatch --strict as well.
#
# The base (linux-source-6.1, Debian 12) is installed with apt-get when
# missing and extracted once into $SOCKBUF_KMOD_CACHE (default
# /var/cache/sockbuf-kmod).  Exit 0 all pass, 1 a check failed, 2 the
# base is unavailable.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# checkpatch's SPDX check runs "python3" from PATH and needs Debian's ply.
export PATH=/usr/bin:/bin:$PATH
ensure_base_package || exit 2
base=$(pristine_base)
mapfile -t patches < <(series_patches)
((${#patches[@]})) || { echo "check: no patches in $KMOD_DIR/patches" >&2; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Only the files the series touches are copied: applying to them is the
# same check as applying to the whole tree, at a fraction of the cost.
mkdir -p "$scratch/git" "$scratch/patch"
for p in "${patches[@]}"; do
	grep -E '^--- a/' "$p" | sed 's|^--- a/||'
done | sort -u | while read -r f; do
	for d in git patch; do
		mkdir -p "$scratch/$d/$(dirname "$f")"
		cp "$base/$f" "$scratch/$d/$f"
	done
done

failed=0
for p in "${patches[@]}"; do
	name=$(basename "$p")
	if (cd "$scratch/git" && git apply --check "$p" && git apply "$p"); then
		echo "ok   git apply      $name"
	else
		echo "FAIL git apply      $name"
		failed=1
	fi
	if (cd "$scratch/patch" && patch -p1 --dry-run -s <"$p" >/dev/null && patch -p1 -s <"$p"); then
		echo "ok   patch          $name"
	else
		echo "FAIL patch          $name"
		failed=1
	fi
	# FILE_PATH_CHANGES asks whether MAINTAINERS needs a new entry for a
	# new file; the selftest's folder is covered by NETWORKING [GENERAL].
	if out=$(cd "$base" && perl scripts/checkpatch.pl --strict --terse --no-summary \
		--ignore FILE_PATH_CHANGES "$p" 2>&1) && [[ -z $out ]]; then
		echo "ok   checkpatch     $name"
	else
		echo "FAIL checkpatch     $name"
		echo "$out" | sed 's/^/     /'
		failed=1
	fi
done

# Every symbol the series exports has kernel-doc that scripts/kernel-doc
# parses without a warning (as patched).
for p in "${patches[@]}"; do
	awk '/^\+\+\+ b\// { file = substr($2, 3) }
	     /^\+EXPORT_SYMBOL/ { match($0, /\(([A-Za-z0-9_]+)\)/); print file, substr($0, RSTART + 1, RLENGTH - 2) }' "$p"
done >"$scratch/exports"
while read -r file sym; do
	doc=$(cd "$scratch/git" && perl "$base/scripts/kernel-doc" -rst -sphinx-version 4.0 -function "$sym" "$file" 2>"$scratch/kdoc.err") || true
	if grep -q "c:function::" <<<"$doc" && ! grep -qi warn "$scratch/kdoc.err"; then
		echo "ok   kernel-doc     $sym ($file)"
	else
		echo "FAIL kernel-doc     $sym ($file)"
		sed 's/^/     /' "$scratch/kdoc.err"
		failed=1
	fi
done <"$scratch/exports"
[[ -s $scratch/exports ]] || { echo "FAIL kernel-doc     the series exports nothing"; failed=1; }

# The out-of-tree module follows the same style.
for f in "$KMOD_DIR"/module/*.[ch]; do
	if out=$(cd "$base" && perl scripts/checkpatch.pl --strict --no-tree --terse --no-summary -f "$f" 2>&1) && [[ -z $out ]]; then
		echo "ok   checkpatch     module/$(basename "$f")"
	else
		echo "FAIL checkpatch     module/$(basename "$f")"
		echo "$out" | sed 's/^/     /'
		failed=1
	fi
done

echo "series: ${#patches[@]} patches, $([[ $failed == 0 ]] && echo passed || echo FAILED)"
exit "$failed"
