// The versioned C ABI between a worker and a backend shared library.
//
// A backend library (libyirage_backend_<name>.so) exports one symbol,
// YirageBackendGetV1, returning a table of functions. Structured data crosses
// the boundary as serialized yirage.v1 protobuf messages (proto/yirage/v1/
// backend.proto); tensors cross it as raw host buffers in their dtype, in
// graph input order and graph output order. No C++ exceptions cross it.
//
// Strings and buffers a backend returns through char** / void** out
// parameters are owned by the caller and released with free_buffer.
#ifndef YIRAGE_BACKENDS_BACKEND_API_H_
#define YIRAGE_BACKENDS_BACKEND_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Version 2 added `describe`; version 3 YirageTimingOptions.reuse_io.
#define YIRAGE_BACKEND_ABI_VERSION 3u
#define YIRAGE_BACKEND_ENTRY_POINT "YirageBackendGetV1"

// Return codes.
#define YIRAGE_OK 0
#define YIRAGE_ERROR 1      // the call failed; *error says why
#define YIRAGE_NO_DEVICE 2  // probe: runtime or device absent
// run/time: the call failed and left the device unusable for this process
// (a CUDA "sticky" error such as an illegal address). The worker reports the
// candidate as failed, gives its batch back and restarts.
#define YIRAGE_DEVICE_LOST 3

typedef struct YirageModule YirageModule;  // compiled plans, opaque

typedef struct YirageTimingOptions {
  int32_t warmup_runs;    // runs before timing starts
  int32_t max_runs;       // stop after this many timed runs...
  double target_seconds;  // ...or once this much time was spent timing
  int32_t min_runs;       // but never fewer than this
  int64_t flush_bytes;    // bytes written between runs to flush caches (0 = backend default)
  // 1: the caller passes the same input buffers, unchanged, as in its last
  // run or time call on this module, and does not read the outputs of this
  // call. A backend with device memory then copies neither (a worker times
  // each candidate in several calls after one verified run: hundreds of
  // megabytes a call for large tensors); one that runs on host buffers may
  // ignore it. 0: the inputs are copied in and the outputs written back.
  int32_t reuse_io;
} YirageTimingOptions;

typedef struct YirageTiming {
  double median_us;
  double min_us;
  int32_t runs;
} YirageTiming;

typedef struct YirageBackendV1 {
  uint32_t abi_version;  // YIRAGE_BACKEND_ABI_VERSION
  const char* name;      // "cpu", "cuda", ...

  // Describes the device as a JSON object in *json_out. Returns YIRAGE_OK when
  // a usable device is present, YIRAGE_NO_DEVICE (with "reason" in the JSON)
  // when the runtime or device is absent.
  int (*probe)(char** json_out);

  // Compiles every plan of a serialized CompileRequest. Writes a serialized
  // CompileResponse (one CompiledPlan per plan) to *response. A plan that fails
  // to compile is reported in the response; it does not fail the call.
  // Returns YIRAGE_ERROR (and *error) only when the request itself is bad.
  int (*compile)(const void* request, size_t request_len, YirageModule** module, void** response,
                 size_t* response_len, char** error);

  // Runs plan `plan_index` once. REQUIRES: the plan compiled.
  int (*run)(YirageModule* module, int32_t plan_index, const void* const* inputs,
             void* const* outputs, char** error);

  // Times plan `plan_index` as the options say (median of the runs).
  int (*time)(YirageModule* module, int32_t plan_index, const void* const* inputs,
              void* const* outputs, const YirageTimingOptions* options, YirageTiming* timing,
              char** error);

  void (*release)(YirageModule* module);
  void (*free_buffer)(void* buffer);

  // What the backend runs: a serialized BackendKernels (its row kernels,
  // library kernels and kernel families with their schedule points) in
  // *response, for its device, or where it has none for the serialized
  // CompileTarget in `target` (target_len 0: none given). The worker reports
  // it to the scheduler, whose search plans only what it names. Returns
  // YIRAGE_NO_DEVICE (and *error) when there is neither a device nor a target
  // and the answer depends on the device.
  int (*describe)(const void* target, size_t target_len, void** response, size_t* response_len,
                  char** error);
} YirageBackendV1;

typedef const YirageBackendV1* (*YirageBackendGetV1Fn)(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // YIRAGE_BACKENDS_BACKEND_API_H_
