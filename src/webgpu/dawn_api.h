// Our own declarations of the compute subset of Dawn's webgpu.h C ABI (the build in
// bun-webgpu-linux-x64@0.1.7; facts from docs/design webgpu-abi.md). No Dawn header is used: every struct
// is written here and pinned with static_asserts on its size and field offsets, so a layout slip fails the
// build instead of corrupting a call. Functions are not declared as symbols; dawn_loader.h holds pointers.
#pragma once

#include <cstddef>
#include <cstdint>

// The pinned sizes and offsets are those of Dawn's 64-bit ABI. The browser build (web/wasm, wasm32: 4-byte
// pointers and size_t) has no Dawn; its JavaScript binding reads every field through the offsetof table that
// web/wasm/dawn_browser.cpp exports, so there the layouts are whatever the compiler gives.
#if INTPTR_MAX == INT64_MAX
#define ET_DAWN_ABI_ASSERT(...) static_assert(__VA_ARGS__)
#else
#define ET_DAWN_ABI_ASSERT(...) static_assert(true)
#endif

namespace edgetrain::wgpu {

using Bool = uint32_t;
using Flags = uint64_t;

struct InstanceImpl;
struct AdapterImpl;
struct DeviceImpl;
struct QueueImpl;
struct BufferImpl;
struct ShaderModuleImpl;
struct BindGroupLayoutImpl;
struct PipelineLayoutImpl;
struct ComputePipelineImpl;
struct BindGroupImpl;
struct CommandEncoderImpl;
struct CommandBufferImpl;
struct ComputePassEncoderImpl;
using Instance = InstanceImpl*;
using Adapter = AdapterImpl*;
using Device = DeviceImpl*;
using Queue = QueueImpl*;
using Buffer = BufferImpl*;
using ShaderModule = ShaderModuleImpl*;
using BindGroupLayout = BindGroupLayoutImpl*;
using PipelineLayout = PipelineLayoutImpl*;
using ComputePipeline = ComputePipelineImpl*;
using BindGroup = BindGroupImpl*;
using CommandEncoder = CommandEncoderImpl*;
using CommandBuffer = CommandBufferImpl*;
using ComputePassEncoder = ComputePassEncoderImpl*;

// ---- enum values (webgpu-abi.md section 4); every enum is 4 bytes ----
constexpr uint32_t kSTypeShaderSourceWGSL = 0x00000002;
constexpr uint32_t kBackendUndefined = 0, kBackendNull = 1, kBackendVulkan = 6, kBackendOpenGL = 7,
                   kBackendOpenGLES = 8;
constexpr uint32_t kAdapterDiscrete = 1, kAdapterIntegrated = 2, kAdapterCPU = 3, kAdapterUnknown = 4;
constexpr uint32_t kFeatureLevelCompatibility = 1, kFeatureLevelCore = 2;
constexpr uint32_t kCallbackModeWaitAnyOnly = 1, kCallbackModeAllowProcessEvents = 2,
                   kCallbackModeAllowSpontaneous = 3;
constexpr uint32_t kStatusSuccess = 1;           // RequestAdapter/RequestDevice/MapAsync/WorkDone/PopErrorScope
constexpr uint32_t kWaitSuccess = 1, kWaitTimedOut = 2, kWaitError = 3;
constexpr uint32_t kErrorNoError = 1, kErrorValidation = 2, kErrorOutOfMemory = 3, kErrorInternal = 4;
constexpr uint32_t kFilterValidation = 1, kFilterOutOfMemory = 2, kFilterInternal = 3;
constexpr uint32_t kLostDestroyed = 2, kLostCallbackCancelled = 3, kLostFailedCreation = 4;
constexpr uint32_t kBindingUniform = 2, kBindingStorage = 3, kBindingReadOnlyStorage = 4;
constexpr Flags kUsageMapRead = 0x1, kUsageCopySrc = 0x4, kUsageCopyDst = 0x8, kUsageUniform = 0x40,
                kUsageStorage = 0x80;
constexpr Flags kMapRead = 0x1;
constexpr Flags kStageCompute = 0x4;
constexpr uint64_t kWholeSize = UINT64_MAX;
constexpr size_t kStrlen = SIZE_MAX;
constexpr uint32_t kLimitU32Undefined = 0xFFFFFFFFu;
constexpr uint32_t kFeatureShaderF16 = 0x0000000A;  // WGPUFeatureName_ShaderF16
// Dawn's experimental subgroup matrices (WGSL `chromium_experimental_subgroup_matrix`): listed only on an
// adapter asked for with the toggles allow_unsafe_apis and use_vulkan_memory_model (DawnTogglesDescriptor).
constexpr uint32_t kFeatureSubgroupMatrix = 0x00050037;
constexpr uint32_t kSTypeDawnTogglesDescriptor = 0x0005000A;
constexpr uint32_t kSTypeAdapterPropertiesSubgroupMatrixConfigs = 0x0005003B;
constexpr uint32_t kMatrixComponentF32 = 1, kMatrixComponentF16 = 2;

// ---- basic structs ----
struct StringView {
  const char* data;
  size_t length;
};
ET_DAWN_ABI_ASSERT(sizeof(StringView) == 16 && offsetof(StringView, length) == 8);
inline StringView sv(const char* s) { return {s, kStrlen}; }
inline StringView sv_absent() { return {nullptr, kStrlen}; }

struct ChainedStruct {
  const ChainedStruct* next;
  uint32_t sType;
};
ET_DAWN_ABI_ASSERT(sizeof(ChainedStruct) == 16 && offsetof(ChainedStruct, sType) == 8);

struct Future {
  uint64_t id;
};
ET_DAWN_ABI_ASSERT(sizeof(Future) == 8);

struct FutureWaitInfo {
  Future future;
  Bool completed;
};
ET_DAWN_ABI_ASSERT(sizeof(FutureWaitInfo) == 16 && offsetof(FutureWaitInfo, completed) == 8);

// Label-only descriptors (queue, shader module, command encoder, command buffer).
struct LabelDescriptor {
  const ChainedStruct* nextInChain;
  StringView label;
};
ET_DAWN_ABI_ASSERT(sizeof(LabelDescriptor) == 24 && offsetof(LabelDescriptor, label) == 8);

// ---- instance and adapter ----
struct InstanceCapabilities {
  const ChainedStruct* nextInChain;
  Bool timedWaitAnyEnable;
  size_t timedWaitAnyMaxCount;
};
ET_DAWN_ABI_ASSERT(sizeof(InstanceCapabilities) == 24 && offsetof(InstanceCapabilities, timedWaitAnyEnable) == 8 &&
              offsetof(InstanceCapabilities, timedWaitAnyMaxCount) == 16);

struct InstanceDescriptor {
  const ChainedStruct* nextInChain;
  InstanceCapabilities capabilities;
};
ET_DAWN_ABI_ASSERT(sizeof(InstanceDescriptor) == 32 && offsetof(InstanceDescriptor, capabilities) == 8);

struct RequestAdapterOptions {
  const ChainedStruct* nextInChain;
  uint32_t featureLevel;
  uint32_t powerPreference;
  Bool forceFallbackAdapter;
  uint32_t backendType;
  void* compatibleSurface;
};
ET_DAWN_ABI_ASSERT(sizeof(RequestAdapterOptions) == 32 && offsetof(RequestAdapterOptions, featureLevel) == 8 &&
              offsetof(RequestAdapterOptions, powerPreference) == 12 &&
              offsetof(RequestAdapterOptions, forceFallbackAdapter) == 16 &&
              offsetof(RequestAdapterOptions, backendType) == 20 &&
              offsetof(RequestAdapterOptions, compatibleSurface) == 24);

// Chained on the instance descriptor, the adapter options and the device descriptor.
struct DawnTogglesDescriptor {
  ChainedStruct chain;
  size_t enabledToggleCount;
  const char* const* enabledToggles;
  size_t disabledToggleCount;
  const char* const* disabledToggles;
};
ET_DAWN_ABI_ASSERT(sizeof(DawnTogglesDescriptor) == 48 && offsetof(DawnTogglesDescriptor, enabledToggleCount) == 16 &&
              offsetof(DawnTogglesDescriptor, enabledToggles) == 24 &&
              offsetof(DawnTogglesDescriptor, disabledToggleCount) == 32 &&
              offsetof(DawnTogglesDescriptor, disabledToggles) == 40);

// One subgroup-matrix shape the adapter offers: left M x K, right K x N, result M x N.
struct SubgroupMatrixConfig {
  uint32_t componentType;
  uint32_t resultComponentType;
  uint32_t M, N, K;
};
ET_DAWN_ABI_ASSERT(sizeof(SubgroupMatrixConfig) == 20 && offsetof(SubgroupMatrixConfig, M) == 8);
// Chained (out) on AdapterInfo; the configs are Dawn's, freed with its FreeMembers function.
struct AdapterPropertiesSubgroupMatrixConfigs {
  ChainedStruct chain;
  size_t configCount;
  const SubgroupMatrixConfig* configs;
};
ET_DAWN_ABI_ASSERT(sizeof(AdapterPropertiesSubgroupMatrixConfigs) == 32 &&
              offsetof(AdapterPropertiesSubgroupMatrixConfigs, configCount) == 16 &&
              offsetof(AdapterPropertiesSubgroupMatrixConfigs, configs) == 24);

// Callback signatures (the last two arguments are always userdata1, userdata2).
using RequestAdapterCallback = void (*)(uint32_t status, Adapter adapter, StringView message, void*, void*);
using RequestDeviceCallback = void (*)(uint32_t status, Device device, StringView message, void*, void*);
using BufferMapCallback = void (*)(uint32_t status, StringView message, void*, void*);
using QueueWorkDoneCallback = void (*)(uint32_t status, StringView message, void*, void*);
using DeviceLostCallback = void (*)(const Device* device, uint32_t reason, StringView message, void*, void*);
using UncapturedErrorCallback = void (*)(const Device* device, uint32_t type, StringView message, void*, void*);
using PopErrorScopeCallback = void (*)(uint32_t status, uint32_t type, StringView message, void*, void*);

// The seven callback-info structs with a mode share this layout (40 bytes); F is the callback type.
template <typename F>
struct CallbackInfo {
  const ChainedStruct* nextInChain;
  uint32_t mode;
  F callback;
  void* userdata1;
  void* userdata2;
};
using RequestAdapterCallbackInfo = CallbackInfo<RequestAdapterCallback>;
using RequestDeviceCallbackInfo = CallbackInfo<RequestDeviceCallback>;
using BufferMapCallbackInfo = CallbackInfo<BufferMapCallback>;
using QueueWorkDoneCallbackInfo = CallbackInfo<QueueWorkDoneCallback>;
using DeviceLostCallbackInfo = CallbackInfo<DeviceLostCallback>;
using PopErrorScopeCallbackInfo = CallbackInfo<PopErrorScopeCallback>;
ET_DAWN_ABI_ASSERT(sizeof(RequestAdapterCallbackInfo) == 40 && offsetof(RequestAdapterCallbackInfo, mode) == 8 &&
              offsetof(RequestAdapterCallbackInfo, callback) == 16 &&
              offsetof(RequestAdapterCallbackInfo, userdata1) == 24 &&
              offsetof(RequestAdapterCallbackInfo, userdata2) == 32);
ET_DAWN_ABI_ASSERT(sizeof(PopErrorScopeCallbackInfo) == 40 && offsetof(PopErrorScopeCallbackInfo, callback) == 16);

struct UncapturedErrorCallbackInfo {
  const ChainedStruct* nextInChain;
  UncapturedErrorCallback callback;
  void* userdata1;
  void* userdata2;
};
ET_DAWN_ABI_ASSERT(sizeof(UncapturedErrorCallbackInfo) == 32 && offsetof(UncapturedErrorCallbackInfo, callback) == 8 &&
              offsetof(UncapturedErrorCallbackInfo, userdata1) == 16 &&
              offsetof(UncapturedErrorCallbackInfo, userdata2) == 24);

struct AdapterInfo {
  const ChainedStruct* nextInChain;
  StringView vendor;
  StringView architecture;
  StringView device;
  StringView description;
  uint32_t backendType;
  uint32_t adapterType;
  uint32_t vendorID;
  uint32_t deviceID;
  uint32_t subgroupMinSize;
  uint32_t subgroupMaxSize;
};
ET_DAWN_ABI_ASSERT(sizeof(AdapterInfo) == 96 && offsetof(AdapterInfo, vendor) == 8 &&
              offsetof(AdapterInfo, architecture) == 24 && offsetof(AdapterInfo, device) == 40 &&
              offsetof(AdapterInfo, description) == 56 && offsetof(AdapterInfo, backendType) == 72 &&
              offsetof(AdapterInfo, adapterType) == 76 && offsetof(AdapterInfo, vendorID) == 80 &&
              offsetof(AdapterInfo, deviceID) == 84 && offsetof(AdapterInfo, subgroupMinSize) == 88 &&
              offsetof(AdapterInfo, subgroupMaxSize) == 92);

struct Limits {
  const ChainedStruct* nextInChain;
  uint32_t maxTextureDimension1D, maxTextureDimension2D, maxTextureDimension3D, maxTextureArrayLayers;
  uint32_t maxBindGroups;
  uint32_t maxBindGroupsPlusVertexBuffers;
  uint32_t maxBindingsPerBindGroup;
  uint32_t maxDynamicUniformBuffersPerPipelineLayout;
  uint32_t maxDynamicStorageBuffersPerPipelineLayout;
  uint32_t maxSampledTexturesPerShaderStage, maxSamplersPerShaderStage;
  uint32_t maxStorageBuffersPerShaderStage;
  uint32_t maxStorageTexturesPerShaderStage;
  uint32_t maxUniformBuffersPerShaderStage;
  uint64_t maxUniformBufferBindingSize;
  uint64_t maxStorageBufferBindingSize;
  uint32_t minUniformBufferOffsetAlignment;
  uint32_t minStorageBufferOffsetAlignment;
  uint32_t maxVertexBuffers;
  uint64_t maxBufferSize;
  uint32_t maxVertexAttributes, maxVertexBufferArrayStride, maxInterStageShaderVariables, maxColorAttachments,
      maxColorAttachmentBytesPerSample;
  uint32_t maxComputeWorkgroupStorageSize;
  uint32_t maxComputeInvocationsPerWorkgroup;
  uint32_t maxComputeWorkgroupSizeX, maxComputeWorkgroupSizeY, maxComputeWorkgroupSizeZ;
  uint32_t maxComputeWorkgroupsPerDimension;
  uint32_t maxImmediateSize;
};
ET_DAWN_ABI_ASSERT(sizeof(Limits) == 152);
ET_DAWN_ABI_ASSERT(offsetof(Limits, maxBindGroups) == 24 && offsetof(Limits, maxBindingsPerBindGroup) == 32 &&
              offsetof(Limits, maxDynamicStorageBuffersPerPipelineLayout) == 40 &&
              offsetof(Limits, maxStorageBuffersPerShaderStage) == 52 &&
              offsetof(Limits, maxUniformBuffersPerShaderStage) == 60 &&
              offsetof(Limits, maxUniformBufferBindingSize) == 64 &&
              offsetof(Limits, maxStorageBufferBindingSize) == 72 &&
              offsetof(Limits, minUniformBufferOffsetAlignment) == 80 &&
              offsetof(Limits, minStorageBufferOffsetAlignment) == 84 && offsetof(Limits, maxVertexBuffers) == 88 &&
              offsetof(Limits, maxBufferSize) == 96 && offsetof(Limits, maxVertexAttributes) == 104 &&
              offsetof(Limits, maxColorAttachmentBytesPerSample) == 120 &&
              offsetof(Limits, maxComputeWorkgroupStorageSize) == 124 &&
              offsetof(Limits, maxComputeInvocationsPerWorkgroup) == 128 &&
              offsetof(Limits, maxComputeWorkgroupSizeX) == 132 && offsetof(Limits, maxComputeWorkgroupSizeY) == 136 &&
              offsetof(Limits, maxComputeWorkgroupSizeZ) == 140 &&
              offsetof(Limits, maxComputeWorkgroupsPerDimension) == 144 && offsetof(Limits, maxImmediateSize) == 148);

// ---- device ----
struct DeviceDescriptor {
  const ChainedStruct* nextInChain;
  StringView label;
  size_t requiredFeatureCount;
  const uint32_t* requiredFeatures;
  const Limits* requiredLimits;
  LabelDescriptor defaultQueue;
  DeviceLostCallbackInfo deviceLostCallbackInfo;
  UncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
};
ET_DAWN_ABI_ASSERT(sizeof(DeviceDescriptor) == 144 && offsetof(DeviceDescriptor, label) == 8 &&
              offsetof(DeviceDescriptor, requiredFeatureCount) == 24 &&
              offsetof(DeviceDescriptor, requiredFeatures) == 32 && offsetof(DeviceDescriptor, requiredLimits) == 40 &&
              offsetof(DeviceDescriptor, defaultQueue) == 48 &&
              offsetof(DeviceDescriptor, deviceLostCallbackInfo) == 72 &&
              offsetof(DeviceDescriptor, uncapturedErrorCallbackInfo) == 112);

// ---- buffers and shaders ----
struct BufferDescriptor {
  const ChainedStruct* nextInChain;
  StringView label;
  Flags usage;
  uint64_t size;
  Bool mappedAtCreation;
};
ET_DAWN_ABI_ASSERT(sizeof(BufferDescriptor) == 48 && offsetof(BufferDescriptor, usage) == 24 &&
              offsetof(BufferDescriptor, size) == 32 && offsetof(BufferDescriptor, mappedAtCreation) == 40);

struct ShaderSourceWGSL {
  ChainedStruct chain;
  StringView code;
};
ET_DAWN_ABI_ASSERT(sizeof(ShaderSourceWGSL) == 32 && offsetof(ShaderSourceWGSL, code) == 16);

// ---- bind group layout ----
struct BufferBindingLayout {
  const ChainedStruct* nextInChain;
  uint32_t type;
  Bool hasDynamicOffset;
  uint64_t minBindingSize;
};
ET_DAWN_ABI_ASSERT(sizeof(BufferBindingLayout) == 24 && offsetof(BufferBindingLayout, type) == 8 &&
              offsetof(BufferBindingLayout, hasDynamicOffset) == 12 &&
              offsetof(BufferBindingLayout, minBindingSize) == 16);

// The sampler / texture / storage-texture sub-layouts, kept all zero (BindingNotUsed).
struct UnusedLayout16 {
  const ChainedStruct* nextInChain;
  uint32_t a;
};
struct UnusedLayout24 {
  const ChainedStruct* nextInChain;
  uint32_t a, b;
  Bool c;
};
ET_DAWN_ABI_ASSERT(sizeof(UnusedLayout16) == 16 && sizeof(UnusedLayout24) == 24);

struct BindGroupLayoutEntry {
  const ChainedStruct* nextInChain;
  uint32_t binding;
  Flags visibility;
  uint32_t bindingArraySize;
  BufferBindingLayout buffer;
  UnusedLayout16 sampler;
  UnusedLayout24 texture;
  UnusedLayout24 storageTexture;
};
ET_DAWN_ABI_ASSERT(sizeof(BindGroupLayoutEntry) == 120 && offsetof(BindGroupLayoutEntry, binding) == 8 &&
              offsetof(BindGroupLayoutEntry, visibility) == 16 &&
              offsetof(BindGroupLayoutEntry, bindingArraySize) == 24 && offsetof(BindGroupLayoutEntry, buffer) == 32 &&
              offsetof(BindGroupLayoutEntry, sampler) == 56 && offsetof(BindGroupLayoutEntry, texture) == 72 &&
              offsetof(BindGroupLayoutEntry, storageTexture) == 96);

struct BindGroupLayoutDescriptor {
  const ChainedStruct* nextInChain;
  StringView label;
  size_t entryCount;
  const BindGroupLayoutEntry* entries;
};
ET_DAWN_ABI_ASSERT(sizeof(BindGroupLayoutDescriptor) == 40 && offsetof(BindGroupLayoutDescriptor, entryCount) == 24 &&
              offsetof(BindGroupLayoutDescriptor, entries) == 32);

struct PipelineLayoutDescriptor {
  const ChainedStruct* nextInChain;
  StringView label;
  size_t bindGroupLayoutCount;
  const BindGroupLayout* bindGroupLayouts;
  uint32_t immediateSize;
};
ET_DAWN_ABI_ASSERT(sizeof(PipelineLayoutDescriptor) == 48 &&
              offsetof(PipelineLayoutDescriptor, bindGroupLayoutCount) == 24 &&
              offsetof(PipelineLayoutDescriptor, bindGroupLayouts) == 32 &&
              offsetof(PipelineLayoutDescriptor, immediateSize) == 40);

// ---- compute pipeline ----
struct ConstantEntry {
  const ChainedStruct* nextInChain;
  StringView key;
  double value;
};
ET_DAWN_ABI_ASSERT(sizeof(ConstantEntry) == 32 && offsetof(ConstantEntry, key) == 8 && offsetof(ConstantEntry, value) == 24);

struct ComputeState {
  const ChainedStruct* nextInChain;
  ShaderModule module;
  StringView entryPoint;
  size_t constantCount;
  const ConstantEntry* constants;
};
ET_DAWN_ABI_ASSERT(sizeof(ComputeState) == 48 && offsetof(ComputeState, module) == 8 &&
              offsetof(ComputeState, entryPoint) == 16 && offsetof(ComputeState, constantCount) == 32 &&
              offsetof(ComputeState, constants) == 40);

struct ComputePipelineDescriptor {
  const ChainedStruct* nextInChain;
  StringView label;
  PipelineLayout layout;
  ComputeState compute;
};
ET_DAWN_ABI_ASSERT(sizeof(ComputePipelineDescriptor) == 80 && offsetof(ComputePipelineDescriptor, layout) == 24 &&
              offsetof(ComputePipelineDescriptor, compute) == 32);

// ---- bind group ----
struct BindGroupEntry {
  const ChainedStruct* nextInChain;
  uint32_t binding;
  Buffer buffer;
  uint64_t offset;
  uint64_t size;
  void* sampler;
  void* textureView;
};
ET_DAWN_ABI_ASSERT(sizeof(BindGroupEntry) == 56 && offsetof(BindGroupEntry, binding) == 8 &&
              offsetof(BindGroupEntry, buffer) == 16 && offsetof(BindGroupEntry, offset) == 24 &&
              offsetof(BindGroupEntry, size) == 32 && offsetof(BindGroupEntry, sampler) == 40 &&
              offsetof(BindGroupEntry, textureView) == 48);

struct BindGroupDescriptor {
  const ChainedStruct* nextInChain;
  StringView label;
  BindGroupLayout layout;
  size_t entryCount;
  const BindGroupEntry* entries;
};
ET_DAWN_ABI_ASSERT(sizeof(BindGroupDescriptor) == 48 && offsetof(BindGroupDescriptor, layout) == 24 &&
              offsetof(BindGroupDescriptor, entryCount) == 32 && offsetof(BindGroupDescriptor, entries) == 40);

struct ComputePassDescriptor {
  const ChainedStruct* nextInChain;
  StringView label;
  const void* timestampWrites;
};
ET_DAWN_ABI_ASSERT(sizeof(ComputePassDescriptor) == 32 && offsetof(ComputePassDescriptor, timestampWrites) == 24);

}  // namespace edgetrain::wgpu
