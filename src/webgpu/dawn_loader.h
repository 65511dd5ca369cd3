// Loads Dawn (libwebgpu_wrapper.so) with dlopen at run time and resolves the functions the backend uses,
// so a build without Dawn still builds and simply reports the WebGPU backend as absent.
// Search order: $EDGETRAIN_DAWN (a file), $EDGETRAIN_DEPS/dawn/, the EDGETRAIN_DEPS_DIR compiled in,
// and the directory of the running executable.
#pragma once

#include <string>

#include "webgpu/dawn_api.h"

namespace edgetrain::wgpu {

// X(name, return type, parameter list): every Dawn entry point we call, resolved by its exported name.
#define ET_DAWN_FUNCTIONS(X)                                                                                 \
  X(CreateInstance, Instance, (const InstanceDescriptor*))                                                   \
  X(InstanceRequestAdapter, Future, (Instance, const RequestAdapterOptions*, RequestAdapterCallbackInfo))    \
  X(InstanceWaitAny, uint32_t, (Instance, size_t, FutureWaitInfo*, uint64_t))                                \
  X(InstanceProcessEvents, void, (Instance))                                                                 \
  X(InstanceRelease, void, (Instance))                                                                       \
  X(AdapterGetInfo, uint32_t, (Adapter, AdapterInfo*))                                                       \
  X(AdapterInfoFreeMembers, void, (AdapterInfo))                                                             \
  X(AdapterGetLimits, uint32_t, (Adapter, Limits*))                                                          \
  X(AdapterHasFeature, uint32_t, (Adapter, uint32_t))                                                        \
  X(AdapterPropertiesSubgroupMatrixConfigsFreeMembers, void, (AdapterPropertiesSubgroupMatrixConfigs))       \
  X(AdapterRequestDevice, Future, (Adapter, const DeviceDescriptor*, RequestDeviceCallbackInfo))             \
  X(AdapterRelease, void, (Adapter))                                                                         \
  X(DeviceGetQueue, Queue, (Device))                                                                         \
  X(DeviceGetLimits, uint32_t, (Device, Limits*))                                                            \
  X(DeviceCreateBuffer, Buffer, (Device, const BufferDescriptor*))                                           \
  X(DeviceCreateShaderModule, ShaderModule, (Device, const LabelDescriptor*))                                \
  X(DeviceCreateBindGroupLayout, BindGroupLayout, (Device, const BindGroupLayoutDescriptor*))                \
  X(DeviceCreatePipelineLayout, PipelineLayout, (Device, const PipelineLayoutDescriptor*))                   \
  X(DeviceCreateComputePipeline, ComputePipeline, (Device, const ComputePipelineDescriptor*))                \
  X(DeviceCreateBindGroup, BindGroup, (Device, const BindGroupDescriptor*))                                  \
  X(DeviceCreateCommandEncoder, CommandEncoder, (Device, const LabelDescriptor*))                            \
  X(DevicePushErrorScope, void, (Device, uint32_t))                                                          \
  X(DevicePopErrorScope, Future, (Device, PopErrorScopeCallbackInfo))                                        \
  X(DeviceDestroy, void, (Device))                                                                           \
  X(DeviceRelease, void, (Device))                                                                           \
  X(BufferMapAsync, Future, (Buffer, Flags, size_t, size_t, BufferMapCallbackInfo))                          \
  X(BufferGetConstMappedRange, const void*, (Buffer, size_t, size_t))                                        \
  X(BufferUnmap, void, (Buffer))                                                                             \
  X(BufferDestroy, void, (Buffer))                                                                           \
  X(BufferRelease, void, (Buffer))                                                                           \
  X(QueueSubmit, void, (Queue, size_t, const CommandBuffer*))                                                \
  X(QueueWriteBuffer, void, (Queue, Buffer, uint64_t, const void*, size_t))                                  \
  X(QueueOnSubmittedWorkDone, Future, (Queue, QueueWorkDoneCallbackInfo))                                    \
  X(QueueRelease, void, (Queue))                                                                             \
  X(CommandEncoderBeginComputePass, ComputePassEncoder, (CommandEncoder, const ComputePassDescriptor*))      \
  X(CommandEncoderCopyBufferToBuffer, void, (CommandEncoder, Buffer, uint64_t, Buffer, uint64_t, uint64_t))  \
  X(CommandEncoderFinish, CommandBuffer, (CommandEncoder, const LabelDescriptor*))                           \
  X(CommandEncoderRelease, void, (CommandEncoder))                                                           \
  X(CommandBufferRelease, void, (CommandBuffer))                                                             \
  X(ComputePassEncoderSetPipeline, void, (ComputePassEncoder, ComputePipeline))                              \
  X(ComputePassEncoderSetBindGroup, void, (ComputePassEncoder, uint32_t, BindGroup, size_t, const uint32_t*)) \
  X(ComputePassEncoderDispatchWorkgroups, void, (ComputePassEncoder, uint32_t, uint32_t, uint32_t))          \
  X(ComputePassEncoderEnd, void, (ComputePassEncoder))                                                       \
  X(ComputePassEncoderRelease, void, (ComputePassEncoder))                                                   \
  X(ShaderModuleRelease, void, (ShaderModule))                                                               \
  X(BindGroupLayoutRelease, void, (BindGroupLayout))                                                         \
  X(PipelineLayoutRelease, void, (PipelineLayout))                                                           \
  X(ComputePipelineRelease, void, (ComputePipeline))                                                         \
  X(BindGroupRelease, void, (BindGroup))

struct Dawn {
#define ET_DAWN_MEMBER(name, ret, params) ret(*name) params = nullptr;
  ET_DAWN_FUNCTIONS(ET_DAWN_MEMBER)
#undef ET_DAWN_MEMBER
  std::string path;  // the file that was loaded
};

// The process-wide Dawn, loaded on first use (never unloaded: Dawn's static state outlives our objects).
// Returns nullptr when no library was found or a function is missing; dawn_load_error() then says which
// paths were tried and what failed.
const Dawn* dawn();
const std::string& dawn_load_error();
// True once the process has begun exiting (see dawn_loader.cpp and context.cpp's exit teardown):
// destructors must not call Dawn then.
bool dawn_exiting();
// Marks the process as exiting (the exit teardown in context.cpp calls it before destroying devices).
void set_dawn_exiting();

}  // namespace edgetrain::wgpu
