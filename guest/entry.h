// SPDX-License-Identifier: MIT
// Every OpenCL entry point the ICD implements, as one list: declarations
// with the exact OpenCL signatures, and the dispatch table (guest/dispatch.c).
// Defined across the layers, named by the top one (dispatch.c; guest/icd.h).
#ifndef CMX_GUEST_ENTRY_H
#define CMX_GUEST_ENTRY_H

#include <CL/cl.h>

#define CMX_ENTRIES(X)                                                                        \
	/* guest/icd.c and context.c */                                                        \
	X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo)          \
	X(clCreateSubDevices) X(clRetainDevice) X(clReleaseDevice) X(clGetDeviceAndHostTimer)  \
	X(clGetHostTimer) X(clCreateContext) X(clCreateContextFromType) X(clRetainContext)     \
	X(clReleaseContext) X(clGetContextInfo) X(clSetContextDestructorCallback)              \
	X(clGetExtensionFunctionAddressForPlatform)                                            \
	/* guest/queue.c */                                                                     \
	X(clCreateCommandQueue) X(clCreateCommandQueueWithProperties) X(clRetainCommandQueue) \
	X(clReleaseCommandQueue) X(clGetCommandQueueInfo) X(clSetCommandQueueProperty)        \
	X(clSetDefaultDeviceCommandQueue) X(clFlush) X(clFinish)                               \
	/* guest/mem.c, transfer.c, rect.c, map.c and image.c */                                \
	X(clCreateBuffer) X(clCreateBufferWithProperties) X(clCreateSubBuffer)                 \
	X(clRetainMemObject) X(clReleaseMemObject) X(clGetMemObjectInfo)                       \
	X(clSetMemObjectDestructorCallback) X(clEnqueueReadBuffer) X(clEnqueueWriteBuffer)     \
	X(clEnqueueReadBufferRect) X(clEnqueueWriteBufferRect) X(clEnqueueCopyBuffer)          \
	X(clEnqueueCopyBufferRect) X(clEnqueueFillBuffer) X(clEnqueueMapBuffer)                \
	X(clEnqueueUnmapMemObject) X(clEnqueueMigrateMemObjects) X(clSVMAlloc) X(clSVMFree)    \
	X(clEnqueueSVMFree) X(clEnqueueSVMMemcpy) X(clEnqueueSVMMemFill) X(clEnqueueSVMMap)    \
	X(clEnqueueSVMUnmap) X(clEnqueueSVMMigrateMem) X(clSetKernelArgSVMPointer)             \
	X(clCreateImage) X(clCreateImage2D) X(clCreateImage3D) X(clCreateImageWithProperties)  \
	X(clGetSupportedImageFormats) X(clGetImageInfo) X(clEnqueueReadImage)                  \
	X(clEnqueueWriteImage) X(clEnqueueCopyImage) X(clEnqueueFillImage) X(clEnqueueMapImage) \
	X(clEnqueueCopyImageToBuffer) X(clEnqueueCopyBufferToImage) X(clCreateSampler)         \
	X(clCreateSamplerWithProperties) X(clRetainSampler) X(clReleaseSampler)                \
	X(clGetSamplerInfo) X(clCreatePipe) X(clGetPipeInfo)                                   \
	/* guest/program.c */                                                                   \
	X(clCreateProgramWithSource) X(clCreateProgramWithBinary) X(clCreateProgramWithIL)     \
	X(clCreateProgramWithBuiltInKernels) X(clRetainProgram) X(clReleaseProgram)            \
	X(clBuildProgram) X(clCompileProgram) X(clLinkProgram) X(clUnloadCompiler)             \
	X(clUnloadPlatformCompiler) X(clGetProgramInfo) X(clGetProgramBuildInfo)               \
	X(clSetProgramReleaseCallback) X(clSetProgramSpecializationConstant)                  \
	/* guest/kernel.c */                                                                    \
	X(clCreateKernel) X(clCreateKernelsInProgram) X(clCloneKernel) X(clRetainKernel)       \
	X(clReleaseKernel) X(clSetKernelArg) X(clGetKernelInfo) X(clGetKernelArgInfo)          \
	X(clGetKernelWorkGroupInfo) X(clGetKernelSubGroupInfo) X(clSetKernelExecInfo)          \
	X(clEnqueueNDRangeKernel) X(clEnqueueTask) X(clEnqueueNativeKernel)                    \
	/* guest/event.c */                                                                     \
	X(clCreateUserEvent) X(clSetUserEventStatus) X(clWaitForEvents) X(clGetEventInfo)      \
	X(clRetainEvent) X(clReleaseEvent) X(clGetEventProfilingInfo) X(clSetEventCallback)    \
	X(clEnqueueMarkerWithWaitList) X(clEnqueueBarrierWithWaitList) X(clEnqueueMarker)      \
	X(clEnqueueBarrier) X(clEnqueueWaitForEvents)

#define CMX_DECLARE(name) extern __typeof__(name) cmx_##name;
CMX_ENTRIES(CMX_DECLARE)
#undef CMX_DECLARE

#endif
