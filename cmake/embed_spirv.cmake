# Wraps glslc's "-mfmt=num" output or glslang's "-x" output (comma-separated uint32 words) into a C++ header.
file(READ ${IN} words)
file(WRITE ${OUT} "// Generated from ${NAME}.comp by glslc or glslang; do not edit.\n#pragma once\n#include <cstdint>\nstatic const uint32_t kSpv_${NAME}[] = {\n${words}};\n")
