// The Python module a CUDA kernel export ships (yirage_kernel.py): it compiles
// kernel.cu with NVRTC for the current GPU, loads it with the CUDA driver API
// and runs the launch sequence of manifest.json on PyTorch tensors, on the
// caller's current stream. It needs PyTorch and the CUDA driver and NVRTC
// libraries only (found through ctypes); no YiRage code.
#ifndef YIRAGE_SERVER_CUDA_PYTHON_LOADER_H_
#define YIRAGE_SERVER_CUDA_PYTHON_LOADER_H_

namespace yirage::server {

// The module's text. It reads manifest.json and kernel.cu from its own folder.
const char* CudaPythonLoaderSource();

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_CUDA_PYTHON_LOADER_H_
