# Run by the install rules (tools/daemon/CMakeLists.txt): writes
# sockbufd.service for the prefix being installed to, which
# `cmake --install --prefix DIR` may set apart from the configured one,
# straight to its destination (nothing written elsewhere).
# In: SOCKBUF_UNIT_IN (the template), SOCKBUF_UNIT_DIR, SOCKBUF_UNIT_SBINDIR
# and SOCKBUF_UNIT_SYSCONFDIR (relative to the prefix, or absolute), and
# the install's CMAKE_INSTALL_PREFIX.  The unit names where the files are
# at run time: DESTDIR is not part of them.
string(REGEX REPLACE "(.)/+$" "\\1" prefix "${CMAKE_INSTALL_PREFIX}")
foreach(dir DIR SBINDIR SYSCONFDIR)
  if(IS_ABSOLUTE "${SOCKBUF_UNIT_${dir}}")
    set(SOCKBUF_${dir} "${SOCKBUF_UNIT_${dir}}")
  else()
    set(SOCKBUF_${dir} "${prefix}/${SOCKBUF_UNIT_${dir}}")
  endif()
endforeach()
file(READ "${SOCKBUF_UNIT_IN}" unit)
string(CONFIGURE "${unit}" unit @ONLY)
set(path "$ENV{DESTDIR}${SOCKBUF_DIR}/sockbufd.service")
message(STATUS "Installing: ${path}")
file(MAKE_DIRECTORY "$ENV{DESTDIR}${SOCKBUF_DIR}")
file(WRITE "${path}" "${unit}")
file(CHMOD "${path}" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${path}")
