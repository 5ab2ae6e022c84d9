# Runs at install time (`cmake --install`, `make install`, cpack's staging install), not at
# configure time: the files that name installed paths (the systemd unit, the config poold
# starts on) get the prefix actually installed to, so `cmake --install build --prefix P` and
# the .deb (prefix /usr) from the same build tree each name their own paths.
#
# Set by packaging/CMakeLists.txt before including this: SP_SOURCE_DIR, SP_STAGE_DIR (a
# scratch directory in the build tree), SP_BINDIR, SP_DOCDIR, SP_DATADIR, SP_PLUGINDIR,
# SP_UNITDIR (relative to the prefix).
set(prefix "${CMAKE_INSTALL_PREFIX}")
# GNU's rule (and GNUInstallDirs'): the prefix /usr keeps its configuration in /etc, any other
# prefix in <prefix>/etc.
if(prefix STREQUAL "/usr")
  set(SYSCONFDIR /etc)
else()
  set(SYSCONFDIR "${prefix}/etc")
endif()
set(BINDIR "${prefix}/${SP_BINDIR}")
set(DOCDIR "${prefix}/${SP_DOCDIR}")
set(PLUGINDIR "${prefix}/${SP_PLUGINDIR}")
set(PYTHONDIR "${prefix}/${SP_DATADIR}/sandpool/python")

# One scratch directory per destination, so installs to two prefixes at once (a cpack run in
# the package test beside `cmake --install --prefix`) never render into each other's files.
string(MD5 destination "$ENV{DESTDIR}|${prefix}")
set(SP_STAGE_DIR "${SP_STAGE_DIR}/${destination}")
file(MAKE_DIRECTORY "${SP_STAGE_DIR}")
configure_file("${SP_SOURCE_DIR}/configs/sandpool.service" "${SP_STAGE_DIR}/sandpool.service"
               @ONLY)
configure_file("${SP_SOURCE_DIR}/configs/packaged.yaml" "${SP_STAGE_DIR}/poold.yaml" @ONLY)

file(INSTALL "${SP_STAGE_DIR}/sandpool.service" DESTINATION "${prefix}/${SP_UNITDIR}"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
# The configuration is the administrator's once installed: a second `make install` leaves an
# existing one alone (the .deb's conffile handling does the same through dpkg).
set(config "$ENV{DESTDIR}${SYSCONFDIR}/sandpool/poold.yaml")
if(EXISTS "${config}")
  message(STATUS "Kept (already there): ${config}; the shipped one is ${SP_STAGE_DIR}/poold.yaml")
else()
  file(INSTALL "${SP_STAGE_DIR}/poold.yaml" DESTINATION "${SYSCONFDIR}/sandpool"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endif()
