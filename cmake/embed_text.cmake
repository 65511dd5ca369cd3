# Wraps a text file (a WGSL shader) into a C++ header as a raw string literal.
file(READ ${IN} text)
file(WRITE ${OUT} "// Generated from ${NAME}.wgsl; do not edit.\n#pragma once\nstatic const char kWgsl_${NAME}[] = R\"edgetrain_wgsl(${text})edgetrain_wgsl\";\n")
