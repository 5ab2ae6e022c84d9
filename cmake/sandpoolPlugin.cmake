# sandpool_add_plugin(<target> [OUTPUT_NAME <name>] SOURCES <source>...): a plugin, the shared
# object poold's pools load (lib<name>.so, <name> defaulting to <target>), built the way the
# plugin ABI expects (docs/plugin-guide.md): a MODULE library against <sandpool/plugin.h>
# (the target sandpool::plugin), C99 for C sources, every symbol hidden but the SP_EXPORT ones.
#
# One definition for both sides: sandpool's own plugins are built with it (worker_host/'s
# sp_add_plugin), and the installed CMake package (find_package(sandpool)) gives it to
# out-of-tree plugins.
function(sandpool_add_plugin target)
  cmake_parse_arguments(P "" "OUTPUT_NAME" "SOURCES" ${ARGN})
  if(NOT P_SOURCES)
    message(FATAL_ERROR "sandpool_add_plugin(${target}): no SOURCES")
  endif()
  if(NOT P_OUTPUT_NAME)
    set(P_OUTPUT_NAME ${target})
  endif()
  add_library(${target} MODULE ${P_SOURCES})
  set_target_properties(${target} PROPERTIES
    C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON
    PREFIX "lib"
    OUTPUT_NAME ${P_OUTPUT_NAME})
  target_link_libraries(${target} PRIVATE sandpool::plugin)
endfunction()
