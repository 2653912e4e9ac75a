# cmake -DBUILD_DIR=<dir> -DTARGET=<probe> -DHEADER=<path> -P expect_missing_header.cmake
# Builds a layering probe, which must fail because HEADER is not on its
# include path. Passes (exit 0, one line) only on that failure; a probe that
# builds, or fails for another reason, fails the test with the build output.
execute_process(
  COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} built: ${HEADER} is visible to it, the layering is not enforced")
endif()
# GCC: "x.h: No such file or directory"; Clang: "'x.h' file not found".
string(REGEX MATCH "${HEADER}'?:? (No such file or directory|file not found)" missing "${out}")
if(NOT missing)
  message(FATAL_ERROR "${TARGET} failed, but not on a missing ${HEADER}:\n${out}")
endif()
message("layering ok: ${TARGET} cannot include ${HEADER}")
