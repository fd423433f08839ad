#!/usr/bin/env bash
# check.sh [--w1]: the checks netdev's patchwork (NIPA) runs, on every
# patch of the three trees (patches/net, patches/net-next, patches/sunrpc)
# and on their 6.12 backports, with nothing ignored:
#
#   apply        against each base of base.env (7.2 and 6.12), net then
#                net-next then sunrpc, each patch on top of the ones
#                before it (git apply --check and patch --dry-run);
#                patches/backport-6.12/<tree>/ replaces a patch there
#   checkpatch   the 7.2 tree's checkpatch.pl --strict --codespell
#                --max-line-length=80 --show-types, no --ignore; a
#                warning passes only with a written answer in
#                checkpatch-answers.txt, printed with it
#   subject      [PATCH net N/M], [PATCH net-next N/M], [RFC PATCH N/M],
#                N the file's number, M the tree's patch count
#   signed-off   a Signed-off-by: matching From:
#   fixes        Fixes: <12+ hex> ("<title>"), id and title as in
#                known-commits.txt
#   cc           every address get_maintainer.pl (7.2 tree, no git)
#                prints for the patch is in its To:, Cc: or Cc: tags
#   kernel-doc   scripts/kernel-doc -Wall of each base on every C file a
#                patch touches: no more warnings than unpatched
#   format       git format-patch output: the zero-commit From line, a
#                diffstat, "diff --git" before every file, function
#                context in the hunk headers of C files, the signature;
#                a cover letter per tree whose base-commit: is
#                base.env's BASE_COMMIT, with a prerequisite-patch-id:
#                for each patch of the trees below it
#   trailers     the trailers (Fixes:, Cc:, Link:, Signed-off-by: ...)
#                in one block, no blank line between them, at the end
#   words        what each mail must say (required-words.txt)
#   figures      the two-guest NFS tables of the sunrpc and net-next
#                covers are table2.py --cover of the raw result lines
#                committed under docs/results/kmod/v4/twoguest-*/, in
#                covers/ and in the exported cover letters alike: a
#                cover cannot carry a figure the data do not give
#   W=1          with --w1 (or SOCKBUF_KMOD_W1=1) only: w1.sh, the
#                touched objects built with W=1 (gcc x86_64, gcc i386,
#                clang), warnings compared with the unpatched base
#
# The bases are fetched and extracted once into $SOCKBUF_KMOD_CACHE
# (default /var/cache/sockbuf-kmod; lib.sh). Only the files the series
# touches are copied for the apply and kernel-doc checks. Exit 0 all
# pass, 1 a check failed, 2 a base or a tool is unavailable.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

w1=${SOCKBUF_KMOD_W1:-0}
[[ ${1:-} == --w1 ]] && w1=1

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

start=$SECONDS
read -r -a bases <<<"$BASES"
read -r -a trees <<<"$SERIES_TREES"
answers=$KMOD_DIR/checkpatch-answers.txt
known=$KMOD_DIR/known-commits.txt
tool_tree=
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
npatches=0

fail() { echo "FAIL $*"; failed=1; }

# The tree a patch file belongs to: patches/<tree>/ or
# patches/backport-<base>/<tree>/.
tree_of() { basename "$(dirname "$1")"; }

header() { # file, field: the header's value, continuation lines joined
	awk -v f="$2" '
		/^$/ { exit }
		$0 ~ "^" f ":" { on = 1; sub("^" f ":[ ]*", ""); v = v " " $0; next }
		/^[ \t]/ && on { v = v " " $0; next }
		{ on = 0 }
		END { print v }' "$1"
}

# The answer to a checkpatch message of TYPE in patch file FILE, if any.
answer() { # file, type
	local pat type text
	while read -r pat type text; do
		[[ -z $pat || $pat == \#* ]] && continue
		# shellcheck disable=SC2053
		[[ $(basename "$1") == $pat && $type == "$2" ]] && { echo "$text"; return 0; }
	done <"$answers"
	return 1
}

check_checkpatch() { # file, name
	local out line type ans bad=0
	out=$(cd "$tool_tree" && perl scripts/checkpatch.pl --strict --codespell \
		--codespellfile "$codespell" --max-line-length=80 --show-types --terse \
		--no-summary "$1" 2>&1) || true
	while IFS= read -r line; do
		[[ -z $line ]] && continue
		type=$(sed -n 's/^[^:]*:[0-9]*: [A-Z]*:\([A-Z_0-9]*\):.*/\1/p' <<<"$line")
		if [[ -n $type ]] && ans=$(answer "$1" "$type"); then
			echo "     answered: ${line#*: }"
			echo "       -> $ans"
		else
			echo "     ${line#*: }"
			bad=1
		fi
	done <<<"$out"
	if ((bad)); then fail "checkpatch     $2"; else echo "ok   checkpatch     $2"; fi
}

check_subject() { # file, name, tree, number, count
	local subj want
	subj=$(header "$1" Subject | sed 's/^ *//')
	case $3 in
	net) want="[PATCH net $4/$5] " ;;
	net-next) want="[PATCH net-next $4/$5] " ;;
	sunrpc) want="[RFC PATCH $4/$5] " ;;
	*) want="?" ;;
	esac
	if [[ $subj == "$want"* && ${#subj} -gt ${#want} ]]; then
		echo "ok   subject        $2: ${want% }"
	else
		fail "subject        $2: '$subj' does not start with '$want'"
	fi
}

check_signoff() { # file, name
	local from
	from=$(header "$1" From | sed 's/^ *//')
	if grep -qxF "Signed-off-by: $from" "$1"; then
		echo "ok   signed-off     $2"
	else
		fail "signed-off     $2: no 'Signed-off-by: $from'"
	fi
}

check_fixes() { # file, name
	local line id title kid ktitle bad=0 n=0
	while IFS= read -r line; do
		n=$((n + 1))
		if [[ ! $line =~ ^Fixes:\ ([0-9a-f]{12,40})\ \(\"(.+)\"\)$ ]]; then
			fail "fixes          $2: malformed '$line'"
			bad=1
			continue
		fi
		id=${BASH_REMATCH[1]} title=${BASH_REMATCH[2]}
		while IFS=' ' read -r kid ktitle; do
			[[ -z $kid || $kid == \#* ]] && continue
			[[ $kid == "$id"* || $id == "$kid"* ]] && break
			kid=
		done <"$known"
		if [[ -z $kid ]]; then
			fail "fixes          $2: $id is not in known-commits.txt"
			bad=1
		elif [[ $ktitle != "$title" ]]; then
			fail "fixes          $2: $id is \"$ktitle\", not \"$title\""
			bad=1
		fi
	done < <(sed -n '/^---$/q; /^Fixes:/p' "$1")
	((n && !bad)) && echo "ok   fixes          $2: $n tag(s) match known-commits.txt"
	return 0
}

check_cc() { # file, name
	local to addr missing=()
	to=$( (header "$1" To; header "$1" Cc; sed -n '/^---$/q; s/^Cc: //p' "$1") | tr 'A-Z' 'a-z')
	while IFS= read -r addr; do
		addr=$(sed 's/.*<\(.*\)>.*/\1/' <<<"$addr" | tr 'A-Z' 'a-z')
		[[ -z $addr ]] && continue
		grep -qF "$addr" <<<"$to" || missing+=("$addr")
	done < <(cd "$tool_tree" && perl scripts/get_maintainer.pl --no-git --no-git-fallback \
		--no-rolestats "$1" 2>/dev/null)
	if ((${#missing[@]})); then
		fail "cc_maintainers $2: not in To/Cc: ${missing[*]}"
	else
		echo "ok   cc_maintainers $2"
	fi
}

# git format-patch's shape. A patch: the zero-commit From line, a
# diffstat, "diff --git" before every "--- " file header, hunk headers of
# C files with function context (one at least), the signature.
check_format() { # file, name
	local bad=()
	[[ $(sed -n 1p "$1") == 'From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001' ]] ||
		bad+=("no zero-commit From line")
	grep -qE '^-- $' "$1" || bad+=("no signature")
	if [[ $(basename "$1") == 0000-* ]]; then
		grep -qE '^ [0-9]+ files? changed' "$1" || bad+=("no diffstat")
		grep -qx "base-commit: $BASE_COMMIT" "$1" || bad+=("base-commit is not $BASE_COMMIT")
		local want=0 t
		for t in "${trees[@]}"; do
			[[ $t == "$(tree_of "$1")" ]] && break
			want=$((want + $(find "$KMOD_DIR/patches/$t" -name '00[0-9][0-9]-*.patch' ! -name '0000-*' | wc -l)))
		done
		(($(grep -c '^prerequisite-patch-id: ' "$1") == want)) ||
			bad+=("$(grep -c '^prerequisite-patch-id: ' "$1") prerequisite-patch-id lines, want $want")
	else
		grep -qE '^ [0-9]+ files? changed' "$1" || bad+=("no diffstat")
		awk '/^diff --git /{d=1; next} /^--- (a\/|\/dev\/null)/{if (!d) bad=1; d=0} END{exit bad}' "$1" ||
			bad+=("a file without diff --git")
		if grep -qE '^diff --git a/.*\.[ch] ' "$1" &&
			! grep -qE '^@@ -[0-9,]+ \+[0-9,]+ @@ .+' "$1"; then
			bad+=("no function context in the hunk headers")
		fi
	fi
	if ((${#bad[@]})); then
		fail "format         $2: ${bad[*]}"
	else
		echo "ok   format         $2"
	fi
}

# The trailers: one block, ending the message (right before "---").
check_trailers() { # file, name
	local msg first last
	msg=$(awk 'f && /^---$/ { exit } f { print } !f && /^$/ { f = 1 }' "$1")
	# (No "| head" or "| grep -q" here: with pipefail, the writer's
	# SIGPIPE would fail the pipeline or the script.)
	first=$(awk '/^(Fixes|Cc|Link|Closes|Reported-by|Suggested-by|Reviewed-by|Acked-by|Tested-by|Signed-off-by): / { print NR; exit }' <<<"$msg")
	last=$(wc -l <<<"$msg")
	if [[ -z $first ]]; then
		fail "trailers       $2: none"
	elif grep -qE '^$|^[^A-Za-z]' <<<"$(sed -n "${first},${last}p" <<<"$msg")"; then
		fail "trailers       $2: not one block (a blank line or text among them)"
	else
		echo "ok   trailers       $2: $(sed -n "${first},${last}p" <<<"$msg" | cut -d: -f1 | tr '\n' ' ')"
	fi
}

# What each mail must say (required-words.txt).
check_words() { # file, name
	local pat text missing=()
	while read -r pat text; do
		[[ -z $pat || $pat == \#* ]] && continue
		# shellcheck disable=SC2053
		[[ $2 == $pat || $(basename "$1") == $pat ]] || continue
		grep -qF -- "$text" "$1" || missing+=("'$text'")
	done <"$KMOD_DIR/required-words.txt"
	if ((${#missing[@]})); then
		fail "words          $2: missing ${missing[*]}"
	else
		echo "ok   words          $2"
	fi
}

# The covers' NFS tables against the raw result lines they summarise.
check_figures() {
	local d block f
	for d in "$KMOD_DIR"/../docs/results/kmod/v4/twoguest-*/; do
		[[ -d $d ]] || continue
		block=$(python3 "$KMOD_DIR/nfs-lab/table2.py" --cover "$d")
		for f in covers/sunrpc.txt covers/net-next.txt \
			patches/sunrpc/0000-cover-letter.patch patches/net-next/0000-cover-letter.patch; do
			if python3 -c 'import sys; sys.exit(sys.argv[1] not in open(sys.argv[2]).read())' \
				"$block" "$KMOD_DIR/$f"; then
				echo "ok   figures        $f: $(basename "$d")"
			else
				fail "figures        $f: not table2.py --cover of $(basename "$d")"
			fi
		done
	done
}

# kernel-doc -Wall on FILE in DIR against the same file in the base.
check_kdoc() { # base tree, patched dir, file, label
	local before after
	before=$("$1/scripts/kernel-doc" -none -Wall "$1/$3" 2>&1 | grep -ci warn) || true
	after=$(cd "$2" && "$1/scripts/kernel-doc" -none -Wall "$3" 2>&1 | grep -ci warn) || true
	if ((after > before)); then
		fail "kernel-doc     $4: $3: $after warnings, $before unpatched"
		(cd "$2" && "$1/scripts/kernel-doc" -none -Wall "$3" 2>&1 | sed 's/^/     /')
	else
		echo "ok   kernel-doc     $4: $3 ($after warnings, $before unpatched)"
	fi
}

for b in "${bases[@]}"; do
	ensure_base_package "$b" || exit 2
	base=$(pristine_base) || exit 2
	[[ -n $tool_tree ]] || tool_tree=$base
	mapfile -t patches < <(series_patches)
	((${#patches[@]})) || { echo "check: no patches in $KMOD_DIR/patches" >&2; exit 1; }
	echo "base $b: $BASE_PACKAGE $BASE_VERSION, ${#patches[@]} patches (${trees[*]})"

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
			fail "git apply      $name"
		fi
		if (cd "$work/patch" && patch -p1 --dry-run -s <"$p" >/dev/null && patch -p1 -s <"$p"); then
			echo "ok   patch          $name"
		else
			fail "patch          $name"
		fi
	done

	# kernel-doc on the C files as the whole series leaves them.
	for p in "${patches[@]}"; do
		sed -n 's|^+++ b/||p' "$p"
	done | grep -E '\.[ch]$' | sort -u | while read -r f; do
		if [[ -e $base/$f ]]; then
			check_kdoc "$base" "$work/git" "$f" "$b"
		else
			echo "ok   kernel-doc     $b: $f (new file: $(cd "$work/git" &&
				"$base/scripts/kernel-doc" -none -Wall "$f" 2>&1 | grep -ci warn) warnings)"
		fi
	done | tee "$work/kdoc.log"
	grep -q '^FAIL' "$work/kdoc.log" && failed=1
done

# Every patch file, covers included, once: the mail checks.
echo "mail checks (the 7.2 tree's checkpatch.pl and get_maintainer.pl)"
# The list comes on fd 3: a check that reads its standard input must not
# eat the rest of it.
while read -r p <&3; do
	name=${p#"$KMOD_DIR/patches/"}
	t=$(tree_of "$p")
	num=$(basename "$p" | sed 's/^0*\([0-9][0-9]*\)-.*/\1/')
	count=$(find "$KMOD_DIR/patches/$t" -name '00[0-9][0-9]-*.patch' ! -name '0000-*' | wc -l)
	check_subject "$p" "$name" "$t" "$num" "$count"
	check_format "$p" "$name"
	check_words "$p" "$name"
	[[ $num == 0 ]] && continue
	check_trailers "$p" "$name"
	npatches=$((npatches + 1))
	check_checkpatch "$p" "$name"
	check_signoff "$p" "$name"
	check_fixes "$p" "$name"
	check_cc "$p" "$name"
done 3< <(for t in "${trees[@]}"; do
	ls "$KMOD_DIR"/patches/"$t"/00[0-9][0-9]-*.patch "$KMOD_DIR"/patches/backport-*/"$t"/00[0-9][0-9]-*.patch 2>/dev/null || true
done)

check_figures

# The out-of-tree module follows the same style.
for f in "$KMOD_DIR"/module/*.[ch]; do
	if out=$(cd "$tool_tree" && perl scripts/checkpatch.pl --strict --codespell \
		--codespellfile "$codespell" --max-line-length=80 --show-types --terse \
		--no-summary --no-tree -f "$f" 2>&1) && [[ -z $out ]]; then
		echo "ok   checkpatch     module/$(basename "$f")"
	else
		fail "checkpatch     module/$(basename "$f")"
		echo "$out" | sed 's/^/     /'
	fi
done

if ((w1)); then
	bash "$KMOD_DIR/w1.sh" || { rc=$?; ((rc == 2)) && exit 2; failed=1; }
else
	echo "skip W=1 builds   (opt-in: check.sh --w1 or SOCKBUF_KMOD_W1=1; w1.sh)"
fi

echo "series: $npatches patch files (${trees[*]}, backports included) on ${#bases[@]} bases" \
	"(${bases[*]}), $((SECONDS - start)) s, $([[ $failed == 0 ]] && echo passed || echo FAILED)"
exit "$failed"
