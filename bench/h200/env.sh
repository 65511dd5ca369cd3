# Sourced at the start of every run on the GPU machine (the `device` tool): unpacks the carried Debian
# runtime packages (Vulkan loader + validation layer into /, OpenBLAS beside), and points the loader
# at the NVIDIA driver. The build itself comes from this machine in .devrun/ (see bench/h200/README.md).
for f in .gl/libvulkan1_*.deb .gl/vulkan-validationlayers_*.deb .gl/libegl1_*.deb .gl/libglvnd0_*.deb .gl/libopengl0_*.deb .gl/libgl1_*.deb .gl/libglx0_*.deb .gl/libgles2_*.deb; do dpkg -x "$f" /; done
ldconfig
mkdir -p /tmp/deps
for f in .gl/libopenblas0-pthread_*.deb .gl/libgfortran5_*.deb .gl/libquadmath0_*.deb; do dpkg -x "$f" /tmp/deps; done
export LD_LIBRARY_PATH=$PWD/.devrun:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:/tmp/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export XDG_RUNTIME_DIR=/tmp/xdg-et
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
export EDGETRAIN_DEPS=$PWD/.devrun/deps
if [ -f .devrun/deps/dawn/libwebgpu_wrapper.so.xz ]; then unxz -f .devrun/deps/dawn/libwebgpu_wrapper.so.xz; fi
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
# Tests that start the CLI (Reliability.*, ...) find the carried one here: the path compiled into the test
# binary is this machine's build/ (tests/harness/cli_child.h).
export EDGETRAIN_TEST_CLI=$PWD/.devrun/edgetrain
