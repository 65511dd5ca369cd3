# Wraps a WGSL kernel into a C++ header as a raw string literal. WGSL has no includes, so a line
# `#include "name.wgsl"` becomes a comment and the file INCLUDE_DIR/name.wgsl is appended to the source
# (WGSL declarations may come in any order; appending keeps the kernel's own line numbers in errors).
file(READ ${IN} text)
string(REGEX MATCHALL "#include \"[A-Za-z0-9_]+\\.wgsl\"" directives "${text}")
set(appended "")
foreach(directive IN LISTS directives)
  string(REGEX REPLACE "#include \"(.*)\"" "\\1" piece "${directive}")
  if(NOT EXISTS ${INCLUDE_DIR}/${piece})
    message(FATAL_ERROR "${NAME}.wgsl includes ${piece}, which is not in ${INCLUDE_DIR}")
  endif()
  file(READ ${INCLUDE_DIR}/${piece} piece_text)
  string(REPLACE "${directive}" "// ${piece}: appended at the end (cmake/embed_text.cmake)" text "${text}")
  string(APPEND appended "\n// ---- ${piece} ----\n${piece_text}")
endforeach()
file(WRITE ${OUT} "// Generated from ${NAME}.wgsl; do not edit.\n#pragma once\nstatic const char kWgsl_${NAME}[] = R\"edgetrain_wgsl(${text}${appended})edgetrain_wgsl\";\n")
