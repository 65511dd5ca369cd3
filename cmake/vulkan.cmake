# The Vulkan backend: GLSL compute shaders compiled by glslc at build time and embedded as uint32 arrays.
find_package(Vulkan)
find_program(GLSLC glslc)
if(NOT Vulkan_FOUND OR NOT GLSLC)
  message(WARNING "Vulkan headers or glslc not found: building without the Vulkan backend (run scripts/setup.sh)")
  return()
endif()
file(GLOB EDGETRAIN_VULKAN_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/vulkan/*.cpp)
file(GLOB EDGETRAIN_SHADERS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/vulkan/shaders/*.comp)
set(EDGETRAIN_SPV_DIR ${CMAKE_CURRENT_BINARY_DIR}/spirv)
set(EDGETRAIN_SPV_HEADERS)
foreach(src ${EDGETRAIN_SHADERS})
  get_filename_component(name ${src} NAME_WE)
  set(hdr ${EDGETRAIN_SPV_DIR}/${name}.spv.h)
  add_custom_command(OUTPUT ${hdr}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${EDGETRAIN_SPV_DIR}
    COMMAND ${GLSLC} --target-env=vulkan1.2 -O -I${CMAKE_CURRENT_SOURCE_DIR}/src/vulkan/shaders
            -MD -MF ${EDGETRAIN_SPV_DIR}/${name}.d -MT ${hdr} -mfmt=num -o ${EDGETRAIN_SPV_DIR}/${name}.spv.inc ${src}
    COMMAND ${CMAKE_COMMAND} -DNAME=${name} -DIN=${EDGETRAIN_SPV_DIR}/${name}.spv.inc -DOUT=${hdr}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_spirv.cmake
    DEPENDS ${src} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_spirv.cmake
    DEPFILE ${EDGETRAIN_SPV_DIR}/${name}.d  # glslc lists the included .glsl files, so editing one rebuilds
    COMMENT "glslc ${name}.comp")
  list(APPEND EDGETRAIN_SPV_HEADERS ${hdr})
endforeach()
# Kernels that Debian 12's glslc cannot compile need glslang 15, which scripts/setup.sh unpacks into
# .deps/glslang-cm2: those using cooperative matrices 2 (shaders/cm2/, VK_NV_cooperative_matrix2: workgroup-
# scope matrices, tensor addressing, reductions; SPIR-V for Vulkan 1.3) and VK_KHR_cooperative_matrix
# (shaders/khr/; Vulkan 1.2). Without it they are left out (EDGETRAIN_VK_CM2 0) and never selected.
find_program(GLSLANG_CM2 glslang PATHS ${CMAKE_CURRENT_SOURCE_DIR}/.deps/glslang-cm2 NO_DEFAULT_PATH NO_CACHE)
file(GLOB EDGETRAIN_CM2_SHADERS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/vulkan/shaders/cm2/*.comp)
file(GLOB EDGETRAIN_KHR_SHADERS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/vulkan/shaders/khr/*.comp)
# glslang's depfile names its own output, not the header: the kernels depend on every .glsl instead.
file(GLOB EDGETRAIN_CM2_INCLUDES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/vulkan/shaders/*.glsl)
if(GLSLANG_CM2)
  foreach(src ${EDGETRAIN_CM2_SHADERS} ${EDGETRAIN_KHR_SHADERS})
    get_filename_component(name ${src} NAME_WE)
    get_filename_component(dir ${src} DIRECTORY)
    get_filename_component(dir ${dir} NAME)
    if(dir STREQUAL "cm2")
      set(env vulkan1.3)
    else()
      set(env vulkan1.2)
    endif()
    set(hdr ${EDGETRAIN_SPV_DIR}/${name}.spv.h)
    add_custom_command(OUTPUT ${hdr}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${EDGETRAIN_SPV_DIR}
      COMMAND ${GLSLANG_CM2} --target-env ${env} -V -I${CMAKE_CURRENT_SOURCE_DIR}/src/vulkan/shaders
              -x -o ${EDGETRAIN_SPV_DIR}/${name}.spv.inc ${src} > /dev/null
      COMMAND ${CMAKE_COMMAND} -DNAME=${name} -DIN=${EDGETRAIN_SPV_DIR}/${name}.spv.inc -DOUT=${hdr}
              -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_spirv.cmake
      DEPENDS ${src} ${EDGETRAIN_CM2_INCLUDES} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_spirv.cmake
      COMMENT "glslang ${dir}/${name}.comp")
    list(APPEND EDGETRAIN_SPV_HEADERS ${hdr})
  endforeach()
  set(EDGETRAIN_VK_CM2 1)
else()
  message(STATUS "glslang 15 not in .deps/glslang-cm2: the cooperative-matrix-2 and KHR cooperative-matrix kernels are left out")
  set(EDGETRAIN_VK_CM2 0)
endif()
add_custom_target(edgetrain_shaders DEPENDS ${EDGETRAIN_SPV_HEADERS})
target_sources(edgetrain PRIVATE ${EDGETRAIN_VULKAN_SOURCES})
add_dependencies(edgetrain edgetrain_shaders)
target_include_directories(edgetrain PRIVATE ${EDGETRAIN_SPV_DIR})
target_link_libraries(edgetrain PRIVATE Vulkan::Vulkan)
target_compile_definitions(edgetrain PUBLIC EDGETRAIN_HAS_VULKAN=1 PRIVATE EDGETRAIN_VK_CM2=${EDGETRAIN_VK_CM2})
# Vulkan structs are initialised as {VK_STRUCTURE_TYPE_...} with the remaining fields zeroed on purpose.
set_source_files_properties(${EDGETRAIN_VULKAN_SOURCES} PROPERTIES COMPILE_OPTIONS -Wno-missing-field-initializers)
