# CMake includes this right after llama.cpp's project() (CMAKE_PROJECT_llama.cpp_INCLUDE, set in
# llama-cpp.txt) when llama-cpp-python builds it: it skips llama.cpp's `common` library and the
# cpp-httplib only common links, 47% of the compile work. llama-cpp-python forces
# LLAMA_BUILD_COMMON on as a cache entry and ships common as libllama-common.so, which its
# Python bindings never load; mirage calls libllama and ggml only (Llama, state copies,
# grammars). A normal variable shadows the cache entry in llama.cpp's directory scope and the
# ones below it (vendor/): option() leaves it alone (policy CMP0077 is NEW there), so
# `if (LLAMA_BUILD_COMMON)` is false there and libllama and ggml build as before.
set(LLAMA_BUILD_COMMON OFF)
