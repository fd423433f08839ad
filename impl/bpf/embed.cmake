# Writes OUT, a header holding the bytes of the file IN as
# `static const unsigned char NAME[]`: the compiled BPF program goes into
# the library itself, nothing to install beside it.
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "// Generated from ${IN} by impl/bpf/embed.cmake: do not edit.\n"
  "#pragma once\nstatic const unsigned char ${NAME}[] = {\n${bytes}\n};\n")
