# The runner without a compiler: included by lib/Runner/CMakeLists.txt in the
# full build and by runtime/CMakeLists.txt when runtime/ is built alone (the
# GPU check machine: a C++ compiler, CMake, CUDA; no LLVM). Needs the target
# fsdprt. Nothing here links MLIR or LLVM; the JIT (libfsdpjit, the full
# build only) is loaded by JitLoader.cpp with dlopen.
#
#   FSDPNpy        .npy files and the Bytes buffer (also sanitized alone)
#   FSDPManifest   the manifest's JSON and its checks (shared with the JIT)
#   FSDPRunner     sessions, rank threads, inputs, shards, results,
#                  checkpoints, the device path, step libraries
#   fsdprun        libfsdprun.so: the C API (runtime/include/fsdprun.h)
get_filename_component(FSDP_RUNNER_DIR ${CMAKE_CURRENT_LIST_DIR} ABSOLUTE)
get_filename_component(FSDP_SOURCE_ROOT ${CMAKE_CURRENT_LIST_DIR}/../.. ABSOLUTE)
include(GNUInstallDirs)
find_package(Threads REQUIRED)

if(NOT TARGET FSDPLayout)
  add_library(FSDPLayout STATIC ${FSDP_SOURCE_ROOT}/lib/Layout/LayoutMath.cpp)
  target_include_directories(FSDPLayout PUBLIC ${FSDP_SOURCE_ROOT}/include)
  set_target_properties(FSDPLayout PROPERTIES POSITION_INDEPENDENT_CODE ON)
endif()

add_library(FSDPNpy STATIC ${FSDP_RUNNER_DIR}/Bytes.cpp ${FSDP_RUNNER_DIR}/Npy.cpp)
target_include_directories(FSDPNpy PUBLIC ${FSDP_RUNNER_DIR} ${FSDP_SOURCE_ROOT}/include)
set_target_properties(FSDPNpy PROPERTIES POSITION_INDEPENDENT_CODE ON)

add_library(FSDPManifest STATIC ${FSDP_RUNNER_DIR}/Json.cpp ${FSDP_RUNNER_DIR}/Manifest.cpp)
target_include_directories(FSDPManifest PUBLIC
  $<BUILD_INTERFACE:${FSDP_SOURCE_ROOT}/include>
  $<BUILD_INTERFACE:${FSDP_RUNNER_DIR}>)
target_link_libraries(FSDPManifest PUBLIC FSDPLayout)
set_target_properties(FSDPManifest PROPERTIES POSITION_INDEPENDENT_CODE ON)

add_library(FSDPRunner STATIC
  ${FSDP_RUNNER_DIR}/Blas.cpp
  ${FSDP_RUNNER_DIR}/Checkpoint.cpp
  ${FSDP_RUNNER_DIR}/Device.cpp
  ${FSDP_RUNNER_DIR}/Files.cpp
  ${FSDP_RUNNER_DIR}/HostCpu.cpp
  ${FSDP_RUNNER_DIR}/Inputs.cpp
  ${FSDP_RUNNER_DIR}/JitLoader.cpp
  ${FSDP_RUNNER_DIR}/Memory.cpp
  ${FSDP_RUNNER_DIR}/RankRun.cpp
  ${FSDP_RUNNER_DIR}/Report.cpp
  ${FSDP_RUNNER_DIR}/Results.cpp
  ${FSDP_RUNNER_DIR}/Session.cpp
  ${FSDP_RUNNER_DIR}/Shards.cpp
  ${FSDP_RUNNER_DIR}/StepLibrary.cpp)
set_target_properties(FSDPRunner PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(FSDPRunner PUBLIC
  $<BUILD_INTERFACE:${FSDP_SOURCE_ROOT}/include>
  $<BUILD_INTERFACE:${FSDP_RUNNER_DIR}>)
target_link_libraries(FSDPRunner PUBLIC FSDPManifest FSDPNpy fsdprt
                                        Threads::Threads ${CMAKE_DL_LIBS})
# Contractions lowered by fsdp-linalg-to-blas call cblas_?gemm.
find_library(FSDP_OPENBLAS_LIBRARY NAMES openblas)
if(FSDP_OPENBLAS_LIBRARY)
  # Opened at run time, not linked (Blas.h: OpenBLAS picks its kernels when
  # it loads). Also what fsdp-compile links a compute=fast step against.
  target_compile_definitions(FSDPRunner PRIVATE
    FSDP_OPENBLAS_PATH="${FSDP_OPENBLAS_LIBRARY}")
else()
  message(WARNING "OpenBLAS not found: the runner runs compute=loops steps only")
endif()
# On Intel CPUs the runner prefers MKL where it is installed (Blas.h): the
# `mkl` wheel puts libmkl_rt in the venv's lib/, which is searched at run
# time (the wheel may be installed after configuring).
if(FSDP_PYTHON)
  execute_process(
    COMMAND "${FSDP_PYTHON}" -c "import sys; print(sys.prefix)"
    OUTPUT_VARIABLE FSDP_PYTHON_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE FSDP_PYTHON_PREFIX_RESULT ERROR_QUIET)
  if(FSDP_PYTHON_PREFIX_RESULT EQUAL 0 AND FSDP_PYTHON_PREFIX)
    target_compile_definitions(FSDPRunner PRIVATE
      FSDP_MKL_SEARCH_DIR="${FSDP_PYTHON_PREFIX}/lib")
  endif()
endif()

# libfsdprun.so: the C API (runtime/include/fsdprun.h) for embedding hosts
# and Python. Only the fsdprun_* functions are exported.
add_library(fsdprun SHARED ${FSDP_RUNNER_DIR}/CAPI.cpp)
target_link_libraries(fsdprun PRIVATE FSDPRunner)
target_include_directories(fsdprun PUBLIC
  $<BUILD_INTERFACE:${FSDP_SOURCE_ROOT}/runtime/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(fsdprun PROPERTIES CXX_VISIBILITY_PRESET hidden
                                         VISIBILITY_INLINES_HIDDEN ON)
if(FSDP_RUNNER_INSTALL_EXPORT)
  install(TARGETS fsdprun EXPORT ${FSDP_RUNNER_INSTALL_EXPORT}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
else()
  install(TARGETS fsdprun LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(FILES ${FSDP_SOURCE_ROOT}/runtime/include/fsdprun.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
