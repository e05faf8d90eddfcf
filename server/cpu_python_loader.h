// The Python module a CPU kernel export ships (yirage_kernel.py): it builds
// the kernel with manifest.json's build command where the library is missing,
// loads it with ctypes (its own handle, RTLD_LOCAL) and calls the entry point
// on NumPy arrays or CPU PyTorch tensors. No YiRage code.
#ifndef YIRAGE_SERVER_CPU_PYTHON_LOADER_H_
#define YIRAGE_SERVER_CPU_PYTHON_LOADER_H_

namespace yirage::server {

// The module's text. It reads manifest.json from its own folder.
const char* CpuPythonLoaderSource();

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_CPU_PYTHON_LOADER_H_
