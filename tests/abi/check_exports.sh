#!/usr/bin/env bash
# check_exports.sh LIB HEADER MAP SYMBOLS: the shared library's ABI is the C
# API and nothing else.  Fails when LIB exports (defines in its dynamic
# symbol table) a symbol that is not a sockbuf_ function, or one without a
# symbol version, and when the functions it exports, the SOCKBUF_API
# declarations of HEADER, the version script MAP and the Debian symbols
# file SYMBOLS do not name the same functions at the same versions.
set -euo pipefail
lib=$1 header=$2 map=$3 symbols=$4
fail=0
bad() {
	echo "abi: $*" >&2
	fail=1
}

# Version nodes of the script: a word before "{".
mapfile -t nodes < <(sed 's,/\*.*\*/,,; /\/\*/,/\*\//d' "$map" | grep -o '^[A-Z][A-Z0-9_.]* *{' | tr -d ' {')
((${#nodes[@]})) || bad "no version node in $map"

# nm -D prints NAME@@VERSION for a default version, NAME@VERSION for an
# older one, NAME alone when unversioned; each node is also an absolute
# symbol (type A) of its own name.
exports=()
while read -r _ type name; do
	if [[ $type == A ]] && printf '%s\n' "${nodes[@]}" | grep -qx "${name%%@*}"; then
		continue
	fi
	if [[ $type != T || ! $name =~ ^sockbuf_[a-z0-9_]+@@?SOCKBUF_[0-9.]+$ ]]; then
		bad "exported but not a versioned sockbuf_ function: $type $name"
		continue
	fi
	exports+=("$name")
done < <(nm -D --defined-only "$lib")
((${#exports[@]})) || bad "$lib exports no sockbuf_ function"

# What each source says, as sorted NAME lines (NAME@VERSION for the
# library and the symbols file).
from_lib=$(printf '%s\n' "${exports[@]}" | sed 's/@@/@/' | sort)
from_symbols=$(awk 'NR > 1 && $1 ~ /^sockbuf_/ {print $1}' "$symbols" | sort)
# (|| true: a source with no name at all is reported below, not a
# silent exit of the pipeline.)
from_header=$(grep -o 'SOCKBUF_API [^(]*(' "$header" | grep -o 'sockbuf_[a-z0-9_]*($' | tr -d '(' | sort || true)
from_map=$(sed 's,/\*.*\*/,,; /\/\*/,/\*\//d' "$map" | grep -o '^[[:space:]]*sockbuf_[a-z0-9_]*;' | tr -d ' \t;' | sort || true)
[[ -n $from_header ]] || bad "$header declares no SOCKBUF_API sockbuf_ function"
[[ -n $from_map ]] || bad "$map lists no sockbuf_ symbol"

# dpkg-gensymbols lists each version node as NODE@NODE.
for node in "${nodes[@]}"; do
	grep -q "^ $node@$node " "$symbols" || bad "$(basename "$symbols") lacks the node $node@$node"
done

compare() { # what_a a what_b b
	if [[ $2 != "$4" ]]; then
		bad "$1 and $3 differ (< $1, > $3):"
		diff <(echo "$2") <(echo "$4") >&2 || true
	fi
}
compare "the library's exports" "$from_lib" "$(basename "$symbols")" "$from_symbols"
compare "the header's SOCKBUF_API functions" "$from_header" "the version script" "$from_map"
compare "the version script" "$from_map" "the library's exports" "$(sed 's/@.*//' <<<"$from_lib")"

if ((fail)); then
	exit 1
fi
echo "abi: ${#exports[@]} functions exported, all versioned (${nodes[*]}), nothing else"
