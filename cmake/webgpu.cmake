# The WebGPU backend: Dawn's C API, declared by the project itself, loaded with dlopen at run time, so a
# machine without Dawn still builds and reports the backend as absent. WGSL shaders are embedded as text.
file(GLOB EDGETRAIN_WEBGPU_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/webgpu/*.cpp)
if(NOT EDGETRAIN_WEBGPU_SOURCES)
  return()
endif()
file(GLOB EDGETRAIN_WGSL CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/webgpu/shaders/*.wgsl)
# Pieces that kernels include (`#include "name.wgsl"`, resolved by embed_text.cmake).
set(EDGETRAIN_WGSL_INCLUDE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/src/webgpu/shaders/include)
file(GLOB EDGETRAIN_WGSL_INCLUDES CONFIGURE_DEPENDS ${EDGETRAIN_WGSL_INCLUDE_DIR}/*.wgsl)
set(EDGETRAIN_WGSL_DIR ${CMAKE_CURRENT_BINARY_DIR}/wgsl)
set(EDGETRAIN_WGSL_HEADERS)
foreach(src ${EDGETRAIN_WGSL})
  get_filename_component(name ${src} NAME_WE)
  set(hdr ${EDGETRAIN_WGSL_DIR}/${name}.wgsl.h)
  add_custom_command(OUTPUT ${hdr}
    COMMAND ${CMAKE_COMMAND} -DNAME=${name} -DIN=${src} -DOUT=${hdr} -DINCLUDE_DIR=${EDGETRAIN_WGSL_INCLUDE_DIR}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_text.cmake
    DEPENDS ${src} ${EDGETRAIN_WGSL_INCLUDES} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_text.cmake
    COMMENT "embed ${name}.wgsl")
  list(APPEND EDGETRAIN_WGSL_HEADERS ${hdr})
endforeach()
add_custom_target(edgetrain_wgsl DEPENDS ${EDGETRAIN_WGSL_HEADERS})
target_sources(edgetrain PRIVATE ${EDGETRAIN_WEBGPU_SOURCES})
add_dependencies(edgetrain edgetrain_wgsl)
target_include_directories(edgetrain PRIVATE ${EDGETRAIN_WGSL_DIR})
target_compile_definitions(edgetrain PUBLIC EDGETRAIN_HAS_WEBGPU=1)
