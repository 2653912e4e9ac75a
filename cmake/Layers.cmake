# The layering rule, enforced by the compiler: no target has the source tree
# as an include directory. Each layer's headers are staged (symlinked) under
# ${CMAKE_BINARY_DIR}/include/<folder>/<folder>/, and that include root is a
# PUBLIC include directory of the layer's target only. So "models/unet.h"
# resolves for targets that link tpumesh_models (directly, or through a
# PUBLIC link), and a models/ source that includes "pipeline/generate.h" fails
# with "No such file or directory". tests/layering proves it (ctest -L
# layering).
#
# The links point at the sources, so editing a header needs no reconfigure;
# the globs are CONFIGURE_DEPENDS, so adding or removing a header re-stages
# at the next build.

# Links <dir>/<name> -> each file matching one of the <glob>s (absolute
# paths), and removes the links in <dir> that no longer match (a renamed or
# deleted file).
function(_tpumesh_stage dir)
  file(GLOB files CONFIGURE_DEPENDS ${ARGN})
  file(MAKE_DIRECTORY ${dir})
  set(names)
  foreach(f ${files})
    get_filename_component(name ${f} NAME)
    list(APPEND names ${name})
    set(link ${dir}/${name})
    set(current "")
    if(IS_SYMLINK ${link})
      file(READ_SYMLINK ${link} current)
    endif()
    if(NOT current STREQUAL f)
      file(CREATE_LINK ${f} ${link} SYMBOLIC)
    endif()
  endforeach()
  file(GLOB staged LIST_DIRECTORIES false ${dir}/*)
  foreach(s ${staged})
    get_filename_component(name ${s} NAME)
    if(IS_SYMLINK ${s} AND NOT name IN_LIST names)  # files built into <dir> stay
      file(REMOVE ${s})
    endif()
  endforeach()
endfunction()

# tpumesh_layer_headers(<target> <folder>)
# Stages ${PROJECT_SOURCE_DIR}/<folder>/*.h and makes their include root the
# target's PUBLIC (INTERFACE, for an interface library) include directory:
# "<folder>/x.h" then resolves for the target and whatever links it PUBLIC.
# Every header of the folder is staged, the folder's internal ones too
# (schedulers_internal.h, kernels' *-inl.h): the rule is between folders.
function(tpumesh_layer_headers target folder)
  set(root ${CMAKE_BINARY_DIR}/include/${folder})
  _tpumesh_stage(${root}/${folder} ${PROJECT_SOURCE_DIR}/${folder}/*.h)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${root}>)
  else()
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
  endif()
endfunction()

# tpumesh_layer_private_files(<target> <folder> <glob>...)
# Stages the files of <folder> matching each <glob> (e.g. "*.cc") under an
# include root only <target> sees, PRIVATE. For Highway: foreach_target.h
# re-includes a dispatching source by the path in HWY_TARGET_INCLUDE
# ("kernels/norm.cc"), which must resolve on the include path; this makes it
# resolve for that target without giving it the whole source tree.
function(tpumesh_layer_private_files target folder)
  set(root ${CMAKE_BINARY_DIR}/include-private/${target})
  set(globs)
  foreach(g ${ARGN})
    list(APPEND globs ${PROJECT_SOURCE_DIR}/${folder}/${g})
  endforeach()
  _tpumesh_stage(${root}/${folder} ${globs})
  target_include_directories(${target} PRIVATE ${root})
endfunction()
