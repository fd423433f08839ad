#!/usr/bin/env bash
# check.sh: against each base of base.env (7.2 and 6.12), the series
# applies in order (git apply --check and patch --dry-run, each patch on
# top of the ones before it), and every symbol it exports has kernel-doc
# that the base's scripts/kernel-doc parses without a warning.  Every
# patch (and module/) passes the newest base's checkpatch.pl the way
# netdev's NIPA runs it: --strict --codespell --max-line-length=80.
#
# The bases are fetched and extracted once into $SOCKBUF_KMOD_CACHE
# (default /var/cache/sockbuf-kmod; lib.sh).  Only the files the series
# touches are copied for the apply checks.  Exit 0 all pass, 1 a check
# failed, 2 a base or a tool is unavailable.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# checkpatch's SPDX check runs "python3" from PATH and needs Debian's ply.
export PATH=/usr/bin:/bin:$PATH
codespell=/usr/lib/python3/dist-packages/codespell_lib/data/dictionary.txt
if [[ ! -e $codespell ]]; then
	if [[ $(id -u) != 0 ]]; then
		echo "check: codespell is not installed; run as root to install it" >&2
		exit 2
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		codespell >/dev/null
fi

read -r -a bases <<<"$BASES"
checkpatch_tree=
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
declare -A checked

checkpatch() { # file, extra options...
	local f=$1 out
	shift
	(cd "$checkpatch_tree" && perl scripts/checkpatch.pl --strict --codespell \
		--codespellfile "$codespell" --max-line-length=80 --terse --no-summary "$@" "$f" 2>&1)
}

for b in "${bases[@]}"; do
	ensure_base_package "$b" || exit 2
	base=$(pristine_base) || exit 2
	[[ -n $checkpatch_tree ]] || checkpatch_tree=$base
	mapfile -t patches < <(series_patches)
	((${#patches[@]})) || { echo "check: no patches in $KMOD_DIR/patches" >&2; exit 1; }
	echo "base $b: $BASE_PACKAGE $BASE_VERSION, ${#patches[@]} patches"

	work="$scratch/$b"
	mkdir -p "$work/git" "$work/patch"
	# The files the series changes (a patch that only adds files has
	# none); one the base lacks is left out here and its patch's apply
	# check says FAIL.
	for p in "${patches[@]}"; do
		sed -n 's|^--- a/||p' "$p"
	done | sort -u | while read -r f; do
		[[ -e $base/$f ]] || { echo "note: $f is not in base $b"; continue; }
		for d in git patch; do
			mkdir -p "$work/$d/$(dirname "$f")"
			cp "$base/$f" "$work/$d/$f"
		done
	done

	for p in "${patches[@]}"; do
		name=${p#"$KMOD_DIR/patches/"}
		if (cd "$work/git" && git apply --check "$p" && git apply "$p"); then
			echo "ok   git apply      $name"
		else
			echo "FAIL git apply      $name"
			failed=1
		fi
		if (cd "$work/patch" && patch -p1 --dry-run -s <"$p" >/dev/null && patch -p1 -s <"$p"); then
			echo "ok   patch          $name"
		else
			echo "FAIL patch          $name"
			failed=1
		fi
		[[ -n ${checked[$p]:-} ]] && continue
		checked[$p]=1
		# FILE_PATH_CHANGES asks whether MAINTAINERS needs a new entry
		# for a new file; the selftest's folder is covered by
		# NETWORKING [GENERAL].
		if out=$(checkpatch "$p" --ignore FILE_PATH_CHANGES) && [[ -z $out ]]; then
			echo "ok   checkpatch     $name"
		else
			echo "FAIL checkpatch     $name"
			echo "$out" | sed 's/^/     /'
			failed=1
		fi
	done

	# Every symbol the series exports has kernel-doc that the base's
	# scripts/kernel-doc parses without a warning (as patched).
	for p in "${patches[@]}"; do
		awk '/^\+\+\+ b\// { file = substr($2, 3) }
		     /^\+EXPORT_SYMBOL/ { match($0, /\(([A-Za-z0-9_]+)\)/); print file, substr($0, RSTART + 1, RLENGTH - 2) }' "$p"
	done >"$work/exports"
	# 6.12's kernel-doc is the Perl one and warns without a Sphinx
	# version; 7.2's (Python) has no such option.
	kdoc_opts=(-rst)
	head -1 "$base/scripts/kernel-doc" | grep -q perl && kdoc_opts+=(-sphinx-version 4.0)
	while read -r file sym; do
		doc=$(cd "$work/git" && "$base/scripts/kernel-doc" "${kdoc_opts[@]}" -function "$sym" \
			"$file" 2>"$work/kdoc.err") || true
		if grep -q "c:function::" <<<"$doc" && ! grep -qi warn "$work/kdoc.err"; then
			echo "ok   kernel-doc     $sym ($file)"
		else
			echo "FAIL kernel-doc     $sym ($file)"
			sed 's/^/     /' "$work/kdoc.err"
			failed=1
		fi
	done <"$work/exports"
	[[ -s $work/exports ]] || { echo "FAIL kernel-doc     the series exports nothing"; failed=1; }
done

# The out-of-tree module follows the same style.
for f in "$KMOD_DIR"/module/*.[ch]; do
	if out=$(checkpatch "$f" --no-tree -f) && [[ -z $out ]]; then
		echo "ok   checkpatch     module/$(basename "$f")"
	else
		echo "FAIL checkpatch     module/$(basename "$f")"
		echo "$out" | sed 's/^/     /'
		failed=1
	fi
done

echo "series: ${#checked[@]} patch files on ${#bases[@]} bases (${bases[*]}), $([[ $failed == 0 ]] && echo passed || echo FAILED)"
exit "$failed"
