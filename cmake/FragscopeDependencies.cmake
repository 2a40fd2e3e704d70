# Every dependency comes from a Debian 12 package; a missing one stops configure and names it.
macro(fragscope_require pkg debian)
  find_package(${pkg} ${ARGN} QUIET)
  if(NOT ${pkg}_FOUND)
    message(FATAL_ERROR "fragscope: dependency '${pkg}' not found. Install it with:\n  apt-get install ${debian}\n(or run scripts/test.sh, which installs everything it needs)")
  endif()
endmacro()

# An optional part: ON by default when what it needs was found; ON without it stops configure
# with `missing`, OFF says once what is unavailable (`off`).
function(fragscope_optional var doc found missing off)
  option(${var} "${doc}" ${found})
  if(${var} AND NOT ${found})
    message(FATAL_ERROR "fragscope: ${var}=ON but ${missing}")
  elseif(NOT ${var})
    message(STATUS "fragscope: ${off}")
  endif()
endfunction()

fragscope_require(SQLite3 libsqlite3-dev)
fragscope_require(fmt libfmt-dev)
fragscope_require(ZLIB zlib1g-dev)
# OpenSSL's libcrypto: SHA-256 content hashes.
fragscope_require(OpenSSL libssl-dev)
# Boost.Math (header-only): the distributions behind the p-values.
fragscope_require(Boost libboost-math-dev 1.74 CONFIG)
find_package(Threads REQUIRED)

find_package(Qt6 QUIET COMPONENTS Core Gui Widgets Test Svg PrintSupport)
foreach(comp Core Gui Widgets Test Svg PrintSupport)
  if(NOT Qt6${comp}_FOUND)
    message(FATAL_ERROR "fragscope: Qt6 ${comp} not found. Install it with:\n  apt-get install qt6-base-dev qt6-svg-dev")
  endif()
endforeach()
set(CMAKE_AUTOMOC ON)
set(CMAKE_AUTORCC ON)
fragscope_require(QCustomPlotQt6 libqcustomplot-dev)

# Capture (the CUPTI agent and the record/launch/attach/ps commands) needs CUPTI's headers and
# library: the CUDA Toolkit under /usr/local/cuda (NVIDIA's installer) or Debian's
# nvidia-cuda-toolkit + libcupti-dev. Everything else builds without it.
if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
set(fragscope_have_cupti OFF)
if(CUDAToolkit_FOUND AND TARGET CUDA::cupti)
  set(fragscope_have_cupti ON)
endif()
fragscope_optional(FRAGSCOPE_CAPTURE "Build the CUPTI capture agent and record/launch/attach/ps"
  ${fragscope_have_cupti}
  "the CUDA Toolkit with CUPTI was not found. Install it with:\n  apt-get install nvidia-cuda-toolkit libcupti-dev\n(or point CUDAToolkit_ROOT at your CUDA installation, or configure with -DFRAGSCOPE_CAPTURE=OFF)"
  "capture is not built (no CUPTI, or FRAGSCOPE_CAPTURE=OFF): record, launch, attach and ps are unavailable. For capture install the CUDA Toolkit, or: apt-get install nvidia-cuda-toolkit libcupti-dev")

# Video metrics (`fragscope metrics compute`, GUI File › Add video…) need OpenCV: core, imgproc,
# video (DIS optical flow), videoio (over FFmpeg) and imgcodecs (PNG/JPEG frames, thumbnails),
# from Debian's libopencv-dev. Everything else builds without it; showing thumbnails a session
# already holds needs only Qt.
find_package(OpenCV 4 QUIET COMPONENTS core imgproc video videoio imgcodecs)
set(fragscope_have_opencv OFF)
if(OpenCV_FOUND)
  set(fragscope_have_opencv ON)
endif()
fragscope_optional(FRAGSCOPE_VIDEO "Build video metrics (metrics compute, File › Add video…) with OpenCV"
  ${fragscope_have_opencv}
  "OpenCV was not found. Install it with:\n  apt-get install libopencv-dev\n(or configure with -DFRAGSCOPE_VIDEO=OFF)"
  "video metrics are not built (no OpenCV, or FRAGSCOPE_VIDEO=OFF): `metrics compute` and File › Add video… are unavailable. For them: apt-get install libopencv-dev")

# simdjson (Debian libsimdjson-dev), optional: only bench_kineto_json uses it, to compare the
# Kineto importer's streaming JsonReader with simdjson ondemand (docs/importers.md, Benchmarks).
find_package(simdjson CONFIG QUIET)
set(fragscope_have_simdjson OFF)
if(simdjson_FOUND)
  set(fragscope_have_simdjson ON)
endif()
fragscope_optional(FRAGSCOPE_BENCH_SIMDJSON "Build bench_kineto_json (JsonReader against simdjson)"
  ${fragscope_have_simdjson}
  "simdjson was not found. Install it with:\n  apt-get install libsimdjson-dev\n(or configure with -DFRAGSCOPE_BENCH_SIMDJSON=OFF)"
  "bench_kineto_json is not built (no simdjson, or FRAGSCOPE_BENCH_SIMDJSON=OFF). For it: apt-get install libsimdjson-dev")
