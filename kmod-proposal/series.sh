#!/usr/bin/env bash
# series.sh tree | export: the series as a kernel git tree, and the
# patch files as `git format-patch` writes them.
#
#   tree    $SOCKBUF_KMOD_CACHE/git-7.2: Debian's 7.2.13 source committed as
#           is (fixed author, committer and dates, so that the commit is
#           $BASE_COMMIT of base.env on every machine), then branches net,
#           net-next (on net) and sunrpc (on net-next) made with `git am`
#           from patches/<tree>/. Edit the series there (rebase -i,
#           commit --amend), then export. Several minutes: git add of
#           about 95,000 files.
#   export  patches/<tree>/ rewritten from the tree's branches:
#           git format-patch --cover-letter --base, the cover letter's
#           subject and text from covers/<tree>.txt (the branch
#           description), To and Cc as below. net-next and sunrpc carry
#           prerequisite-patch-id lines for the trees below them.
#
# check.sh checks the committed files; this script is only needed to
# change them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
base_vars 7.2
git_dir=$SOCKBUF_KMOD_CACHE/git-7.2

netdev_to=(--to '"David S. Miller" <davem@davemloft.net>' --to 'Eric Dumazet <edumazet@google.com>'
	--to 'Jakub Kicinski <kuba@kernel.org>' --to 'Paolo Abeni <pabeni@redhat.com>')
netdev_cc=(--cc 'Simon Horman <horms@kernel.org>' --cc 'Neal Cardwell <ncardwell@google.com>'
	--cc 'Kuniyuki Iwashima <kuniyu@google.com>' --cc 'Willem de Bruijn <willemb@google.com>'
	--cc 'Shuah Khan <shuah@kernel.org>' --cc netdev@vger.kernel.org
	--cc linux-kselftest@vger.kernel.org --cc linux-kernel@vger.kernel.org)
memcg_cc=(--cc 'Johannes Weiner <hannes@cmpxchg.org>' --cc 'Michal Hocko <mhocko@kernel.org>'
	--cc 'Roman Gushchin <roman.gushchin@linux.dev>' --cc 'Shakeel Butt <shakeel.butt@linux.dev>'
	--cc 'Muchun Song <muchun.song@linux.dev>' --cc 'Tejun Heo <tj@kernel.org>'
	--cc 'Michal Koutný <mkoutny@suse.com>' --cc cgroups@vger.kernel.org --cc linux-mm@kvack.org)

tree_args() { # tree: the format-patch arguments of the tree's mail
	case $1 in
	net)
		args=(--subject-prefix='PATCH net' "${netdev_to[@]}" "${netdev_cc[@]}"
			--cc 'Wei Wang <weiwan@google.com>' "${memcg_cc[@]}" base..net) ;;
	net-next)
		args=(--subject-prefix='PATCH net-next' "${netdev_to[@]}" "${netdev_cc[@]}"
			--cc 'Jonathan Corbet <corbet@lwn.net>' --cc 'Shuah Khan <skhan@linuxfoundation.org>'
			--cc linux-doc@vger.kernel.org "${memcg_cc[@]}"
			--cc 'Pavel Tikhomirov <ptikhomirov@virtuozzo.com>'
			--cc 'Matthieu Baerts <matttbe@kernel.org>' --cc 'Mat Martineau <martineau@kernel.org>'
			--cc 'Geliang Tang <geliang@kernel.org>' --cc mptcp@lists.linux.dev net..net-next) ;;
	sunrpc)
		args=(--subject-prefix='RFC PATCH'
			--to 'Chuck Lever <chuck.lever@oracle.com>' --to 'Jeff Layton <jlayton@kernel.org>'
			--cc 'NeilBrown <neil@brown.name>' --cc 'Olga Kornievskaia <okorniev@redhat.com>'
			--cc 'Dai Ngo <Dai.Ngo@oracle.com>' --cc 'Tom Talpey <tom@talpey.com>'
			--cc 'Trond Myklebust <trondmy@kernel.org>' --cc 'Anna Schumaker <anna@kernel.org>'
			--cc 'Chuck Lever <cel@kernel.org>' --cc linux-nfs@vger.kernel.org
			"${netdev_to[@]/--to/--cc}" --cc 'Simon Horman <horms@kernel.org>'
			--cc 'Neal Cardwell <ncardwell@google.com>' --cc netdev@vger.kernel.org
			--cc linux-kernel@vger.kernel.org net-next..sunrpc) ;;
	esac
}

make_tree() {
	local base ident=(GIT_AUTHOR_NAME="Debian linux-source-7.2"
		GIT_AUTHOR_EMAIL=debian-kernel@lists.debian.org GIT_AUTHOR_DATE=2026-01-01T00:00:00Z
		GIT_COMMITTER_NAME="Debian linux-source-7.2"
		GIT_COMMITTER_EMAIL=debian-kernel@lists.debian.org
		GIT_COMMITTER_DATE=2026-01-01T00:00:00Z)
	ensure_base_package 7.2 || exit 2
	base=$(pristine_base) || exit 2
	rm -rf "$git_dir"
	cp -a "$base" "$git_dir"
	rm -f "$git_dir/.extracted"
	git -C "$git_dir" init -q -b base
	git -C "$git_dir" config user.name 'Placeholder Submitter'
	git -C "$git_dir" config user.email submitter@placeholder.invalid
	git -C "$git_dir" config gc.auto 0
	# Debian's top-level .gitignore ignores everything at the top: -f.
	nice -n 19 git -C "$git_dir" add -f -A .
	env "${ident[@]}" git -C "$git_dir" -c commit.gpgsign=false commit -q \
		-m "Linux ${BASE_VERSION%-*} (Debian $BASE_PACKAGE $BASE_VERSION)"
	if [[ $(git -C "$git_dir" rev-parse HEAD) != "$BASE_COMMIT" ]]; then
		echo "series: base commit $(git -C "$git_dir" rev-parse HEAD), base.env says $BASE_COMMIT" >&2
		exit 1
	fi
	local prev=base t
	for t in $SERIES_TREES; do
		git -C "$git_dir" checkout -q -b "$t" "$prev"
		# The patches without their cover letter.
		local ps=() p
		for p in "$KMOD_DIR"/patches/"$t"/00[0-9][0-9]-*.patch; do
			[[ $p == */0000-* ]] || ps+=("$p")
		done
		git -C "$git_dir" am -q "${ps[@]}"
		prev=$t
	done
	echo "series: $git_dir: base $BASE_COMMIT, branches $SERIES_TREES"
}

export_patches() {
	local t out
	[[ $(git -C "$git_dir" rev-parse base) == "$BASE_COMMIT" ]] ||
		{ echo "series: $git_dir is not on $BASE_COMMIT: run series.sh tree" >&2; exit 1; }
	for t in $SERIES_TREES; do
		git -C "$git_dir" config "branch.$t.description" "$(cat "$KMOD_DIR/covers/$t.txt")"
		tree_args "$t"
		out=$KMOD_DIR/patches/$t
		rm -f "$out"/00[0-9][0-9]-*.patch
		git -C "$git_dir" format-patch -q --cover-letter --cover-from-description=subject \
			--base="$BASE_COMMIT" --zero-commit --no-thread -o "$out" "${args[@]}"
	done
	ls "$KMOD_DIR"/patches/*/00*.patch
}

case ${1:-} in
tree) make_tree ;;
export) export_patches ;;
*) echo "usage: series.sh tree|export" >&2; exit 2 ;;
esac
