// The browser build's Dawn: instead of dlopen-ing libwebgpu_wrapper.so (src/webgpu/dawn_loader.cpp, left out
// of this build), the function table of dawn_loader.h points at the wgpu* entry points that webgpu.js
// implements on navigator.gpu. The backend (context.cpp, program.cpp, ops_*.cpp), its WGSL and its recorded
// programs are the native files. webgpu.js reads and writes the descriptor structs through the offsetof
// table below, so the JavaScript side never hard-codes a wasm32 layout.
#include <emscripten.h>

#include <cstddef>
#include <string>

#include "webgpu/dawn_loader.h"

namespace edgetrain::wgpu {

// Implemented in JavaScript (webgpu.js, linked with --js-library).
extern "C" {
#define ET_DAWN_DECLARE(name, ret, params) ret wgpu##name params;
ET_DAWN_FUNCTIONS(ET_DAWN_DECLARE)
#undef ET_DAWN_DECLARE
}

// The table holds thunks, not the imports themselves: an import whose signature has a 64-bit integer is
// legalized for JavaScript (split into 32-bit halves), and only direct calls go through that legalization; a
// table entry of the import itself would fail call_indirect's signature check.
template <auto F>
struct Thunk;
template <typename R, typename... A, R (*F)(A...)>
struct Thunk<F> {
  static R call(A... a) { return F(a...); }
};

const Dawn* dawn() {
  static const Dawn table = [] {
    Dawn d;
#define ET_DAWN_BIND(name, ret, params) d.name = &Thunk<&wgpu##name>::call;
    ET_DAWN_FUNCTIONS(ET_DAWN_BIND)
#undef ET_DAWN_BIND
    d.path = "navigator.gpu (web/wasm/webgpu.js)";
    return d;
  }();
  return &table;
}

const std::string& dawn_load_error() {
  static const std::string none;
  return none;
}

// A page is never torn down from inside: nothing runs at exit.
bool dawn_exiting() { return false; }
void set_dawn_exiting() {}

namespace {

// "Struct.field": [offset, size] of every field webgpu.js touches, and "Struct": [sizeof, 0].
std::string layout_json() {
  std::string j = "{";
  auto add = [&](const char* name, size_t offset, size_t size) {
    if (j.size() > 1) j += ",";
    j += "\"" + std::string(name) + "\":[" + std::to_string(offset) + "," + std::to_string(size) + "]";
  };
#define F(T, f) add(#T "." #f, offsetof(T, f), sizeof(T::f));
#define S(T) add(#T, sizeof(T), 0);
  S(StringView) F(StringView, data) F(StringView, length)
  F(ChainedStruct, next) F(ChainedStruct, sType)
  S(FutureWaitInfo) F(FutureWaitInfo, future) F(FutureWaitInfo, completed)
  F(LabelDescriptor, nextInChain) F(LabelDescriptor, label)
  F(RequestAdapterOptions, featureLevel) F(RequestAdapterOptions, powerPreference)
  F(RequestAdapterOptions, forceFallbackAdapter)
  // Every callback-info struct with a mode shares this layout (dawn_api.h).
  F(RequestAdapterCallbackInfo, mode) F(RequestAdapterCallbackInfo, callback)
  F(RequestAdapterCallbackInfo, userdata1) F(RequestAdapterCallbackInfo, userdata2)
  F(UncapturedErrorCallbackInfo, callback) F(UncapturedErrorCallbackInfo, userdata1)
  F(UncapturedErrorCallbackInfo, userdata2)
  F(AdapterInfo, vendor) F(AdapterInfo, architecture) F(AdapterInfo, device) F(AdapterInfo, description)
  F(AdapterInfo, backendType) F(AdapterInfo, adapterType) F(AdapterInfo, vendorID) F(AdapterInfo, deviceID)
  F(AdapterInfo, subgroupMinSize) F(AdapterInfo, subgroupMaxSize)
  // Limits: the field names are the browser's GPUSupportedLimits names.
  F(Limits, maxTextureDimension1D) F(Limits, maxTextureDimension2D) F(Limits, maxTextureDimension3D)
  F(Limits, maxTextureArrayLayers) F(Limits, maxBindGroups) F(Limits, maxBindGroupsPlusVertexBuffers)
  F(Limits, maxBindingsPerBindGroup) F(Limits, maxDynamicUniformBuffersPerPipelineLayout)
  F(Limits, maxDynamicStorageBuffersPerPipelineLayout) F(Limits, maxSampledTexturesPerShaderStage)
  F(Limits, maxSamplersPerShaderStage) F(Limits, maxStorageBuffersPerShaderStage)
  F(Limits, maxStorageTexturesPerShaderStage) F(Limits, maxUniformBuffersPerShaderStage)
  F(Limits, maxUniformBufferBindingSize) F(Limits, maxStorageBufferBindingSize)
  F(Limits, minUniformBufferOffsetAlignment) F(Limits, minStorageBufferOffsetAlignment)
  F(Limits, maxVertexBuffers) F(Limits, maxBufferSize) F(Limits, maxVertexAttributes)
  F(Limits, maxVertexBufferArrayStride) F(Limits, maxInterStageShaderVariables) F(Limits, maxColorAttachments)
  F(Limits, maxColorAttachmentBytesPerSample) F(Limits, maxComputeWorkgroupStorageSize)
  F(Limits, maxComputeInvocationsPerWorkgroup) F(Limits, maxComputeWorkgroupSizeX)
  F(Limits, maxComputeWorkgroupSizeY) F(Limits, maxComputeWorkgroupSizeZ)
  F(Limits, maxComputeWorkgroupsPerDimension) F(Limits, maxImmediateSize)
  F(DeviceDescriptor, label) F(DeviceDescriptor, requiredFeatureCount) F(DeviceDescriptor, requiredFeatures)
  F(DeviceDescriptor, requiredLimits) F(DeviceDescriptor, deviceLostCallbackInfo)
  F(DeviceDescriptor, uncapturedErrorCallbackInfo)
  F(BufferDescriptor, label) F(BufferDescriptor, usage) F(BufferDescriptor, size)
  F(BufferDescriptor, mappedAtCreation)
  F(ShaderSourceWGSL, chain) F(ShaderSourceWGSL, code)
  S(BindGroupLayoutEntry) F(BindGroupLayoutEntry, binding) F(BindGroupLayoutEntry, visibility)
  F(BindGroupLayoutEntry, buffer) F(BufferBindingLayout, type) F(BufferBindingLayout, hasDynamicOffset)
  F(BufferBindingLayout, minBindingSize)
  F(BindGroupLayoutDescriptor, label) F(BindGroupLayoutDescriptor, entryCount) F(BindGroupLayoutDescriptor, entries)
  F(PipelineLayoutDescriptor, bindGroupLayoutCount) F(PipelineLayoutDescriptor, bindGroupLayouts)
  F(ComputePipelineDescriptor, label) F(ComputePipelineDescriptor, layout) F(ComputePipelineDescriptor, compute)
  F(ComputeState, module) F(ComputeState, entryPoint) F(ComputeState, constantCount) F(ComputeState, constants)
  S(ConstantEntry) F(ConstantEntry, key) F(ConstantEntry, value)
  F(BindGroupDescriptor, label) F(BindGroupDescriptor, layout) F(BindGroupDescriptor, entryCount) F(BindGroupDescriptor, entries)
  S(BindGroupEntry) F(BindGroupEntry, binding) F(BindGroupEntry, buffer) F(BindGroupEntry, offset)
  F(BindGroupEntry, size)
#undef F
#undef S
  return j + "}";
}

}  // namespace
}  // namespace edgetrain::wgpu

extern "C" EMSCRIPTEN_KEEPALIVE const char* et_wgpu_layout_json() {
  static const std::string j = edgetrain::wgpu::layout_json();
  return j.c_str();
}
