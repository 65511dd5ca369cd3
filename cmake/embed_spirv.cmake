# Wraps glslc's "-mfmt=num" output (comma-separated uint32 words) into a C++ header.
file(READ ${IN} words)
file(WRITE ${OUT} "// Generated from ${NAME}.comp by glslc; do not edit.\n#pragma once\n#include <cstdint>\nstatic const uint32_t kSpv_${NAME}[] = {\n${words}};\n")
