// cuda-llm's capture library (docs/design.md "Capture", issue 39).
//
// Loaded into the user's program by the CUDA driver at cuInit through CUDA_INJECTION64_PATH
// (the way Nsight tools inject: works with the static cudart nvcc links by default). It
// subscribes CUPTI driver-API callbacks for kernel launches and, for the one launch chosen by
// the environment below, records: the kernel's name, grid, block, dynamic shared memory, every
// parameter's bytes, and for each parameter that is an address inside a device (or managed)
// allocation (or, for a struct passed by value, each 8-byte-aligned word inside it that is
// such an address), the bytes from that address to the end of the allocation before and after
// the launch; the device, its arch and the launch's duration. Nothing else is read: no environment
// variable but its own, no other launch's data, no host memory of the program.
//
//   CUDA_LLM_CAPTURE_OUT        the directory to write (made 0700 by cuda-llm; files 0600)
//   CUDA_LLM_CAPTURE_KERNEL     substring of the mangled or demangled name ("" = any kernel)
//   CUDA_LLM_CAPTURE_LAUNCH     which matching launch, 1-based (default 1)
//   CUDA_LLM_CAPTURE_MODE       "capture" (default) or "time" (every matching launch's
//                               duration into times.json, nothing captured: --slowest)
//   CUDA_LLM_CAPTURE_MAX_BYTES  bytes before + after that may be recorded (default 2 GiB)
//
// Writes manifest.json (or {"version":1,"error":...}), pN.before.bin / pN.after.bin
// (pN_AT.* for the address at byte AT of a by-value struct), and
// seen.json (every kernel launched, with counts; graph launches) at exit and as it goes.
// The driver is reached through dlsym on the already loaded libcuda: no link-time libcuda.

#include <cuda.h>
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

#define CL_STR(x) #x
#define CL_XSTR(x) CL_STR(x)
#define CL_FN(name) decltype(&name) p_##name = nullptr
#define CL_LOAD(h, name) p_##name = reinterpret_cast<decltype(&name)>(dlsym(h, CL_XSTR(name)))

CL_FN(cuCtxSynchronize);
CL_FN(cuMemcpy);
CL_FN(cuMemcpyDtoH);
CL_FN(cuPointerGetAttribute);
CL_FN(cuFuncGetParamInfo);
CL_FN(cuFuncGetName);
CL_FN(cuKernelGetParamInfo);
CL_FN(cuEventCreate);
CL_FN(cuEventRecord);
CL_FN(cuEventSynchronize);
CL_FN(cuEventElapsedTime);
CL_FN(cuEventDestroy);
CL_FN(cuCtxGetDevice);
CL_FN(cuDeviceGetName);
CL_FN(cuDeviceGetAttribute);
CL_FN(cuStreamIsCapturing);

struct Settings {
  std::string out;
  std::string kernel;
  long launch = 1;
  bool time_mode = false;
  unsigned long long max_bytes = 2ULL << 30;
};

struct Pending {  // the chosen launch between its API enter and exit
  bool active = false;
  std::string mangled, demangled;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, smem = 0;
  CUstream stream = nullptr;
  CUevent start = nullptr, end = nullptr;
  std::chrono::steady_clock::time_point t0;
  struct Region {  // an address into a device allocation: the parameter or a word inside it
    size_t at = 0;  // byte offset in the parameter's bytes (0 for a pointer parameter)
    CUdeviceptr base = 0, addr = 0;
    size_t alloc = 0, captured = 0;
    std::vector<unsigned char> before;
  };
  struct Param {
    size_t offset = 0, size = 0;
    std::vector<unsigned char> raw;
    bool pointer = false;  // the parameter is one 8-byte address: regions[0], at 0
    std::vector<Region> regions;  // else the addresses inside a by-value struct (at 8k)
  };
  std::vector<Param> params;
};

Settings g_settings;
constexpr size_t kMaxEmbedded = 64;  // device addresses inside by-value parameters, per launch
std::mutex g_mutex;
std::map<std::string, long> g_seen;  // demangled (or mangled) name -> launches
long g_graph_launches = 0;
long g_recorded = 0;  // launches recorded into a graph by stream capture (never run then)
long g_runtime_launches = 0;  // runtime-API launches (diagnostics: the driver's are captured)
long g_matched = 0;
bool g_done = false;  // captured (or failed): later launches are only counted
bool g_failed = false;
std::vector<std::pair<long, double>> g_times;  // time mode: (matching launch, ms)
std::string g_times_kernel;
Pending g_pending;
thread_local bool t_inside = false;

std::string json_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool write_file(const std::string& name, const void* data, size_t n) {
  std::string path = g_settings.out + "/" + name;
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  size_t left = n;
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w <= 0) {
      close(fd);
      return false;
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  close(fd);
  return rename(tmp.c_str(), path.c_str()) == 0;
}

bool write_text(const std::string& name, const std::string& text) {
  return write_file(name, text.data(), text.size());
}

void write_seen() {
  std::string s = "{\"version\": 1, \"graph_launches\": " + std::to_string(g_graph_launches) +
                  ", \"recorded_in_graphs\": " + std::to_string(g_recorded) +
                  ", \"runtime_launches\": " + std::to_string(g_runtime_launches) +
                  ", \"matched\": " + std::to_string(g_matched) +
                  ", \"captured\": " + (g_done && !g_failed ? "true" : "false") +
                  ", \"kernels\": {";
  bool first = true;
  for (auto& kv : g_seen) {
    if (!first) s += ", ";
    first = false;
    s += "\"" + json_escape(kv.first) + "\": " + std::to_string(kv.second);
  }
  s += "}}\n";
  write_text("seen.json", s);
}

void write_times() {
  std::string s = "{\"version\": 1, \"kernel\": \"" + json_escape(g_times_kernel) +
                  "\", \"times\": [";
  for (size_t i = 0; i < g_times.size(); i++) {
    if (i) s += ", ";
    char buf[64];
    std::snprintf(buf, sizeof buf, "[%ld, %.6f]", g_times[i].first, g_times[i].second);
    s += buf;
  }
  s += "]}\n";
  write_text("times.json", s);
}

void fail(const std::string& why) {
  g_done = true;
  g_failed = true;
  write_text("manifest.json",
             "{\"version\": 1, \"error\": \"" + json_escape(why) + "\"}\n");
  write_seen();
}

std::string demangle(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = (status == 0 && d) ? d : mangled;
  std::free(d);
  return out;
}

void at_exit() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_settings.time_mode) write_times();
  write_seen();
}

// Device or managed memory to the host: cuMemcpyDtoH, else the unified-addressing cuMemcpy
// (host memory a kernel reads directly, e.g. pinned and mapped).
CUresult copy_out(void* host, CUdeviceptr src, size_t n) {
  CUresult r = p_cuMemcpyDtoH ? p_cuMemcpyDtoH(host, src, n) : CUDA_ERROR_NOT_SUPPORTED;
  if (r != CUDA_SUCCESS) r = p_cuMemcpy(reinterpret_cast<CUdeviceptr>(host), src, n);
  return r;
}

std::string cu_error(const char* what, CUresult r) {
  return std::string(what) + " failed with CUDA error " + std::to_string(static_cast<int>(r));
}

// Launch facts from either callback's parameter struct.
struct LaunchView {
  CUfunction f = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, smem = 0;
  CUstream stream = nullptr;
  void** params = nullptr;
  void** extra = nullptr;
};

bool per_thread(CUpti_CallbackId cbid) {
  return cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
}

bool view_of(CUpti_CallbackId cbid, const void* p, LaunchView* v) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
      auto* a = static_cast<const cuLaunchKernel_params*>(p);
      *v = {a->f, {a->gridDimX, a->gridDimY, a->gridDimZ},
            {a->blockDimX, a->blockDimY, a->blockDimZ}, a->sharedMemBytes, a->hStream,
            a->kernelParams, a->extra};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
      auto* a = static_cast<const cuLaunchCooperativeKernel_params*>(p);
      *v = {a->f, {a->gridDimX, a->gridDimY, a->gridDimZ},
            {a->blockDimX, a->blockDimY, a->blockDimZ}, a->sharedMemBytes, a->hStream,
            a->kernelParams, nullptr};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      auto* a = static_cast<const cuLaunchKernelEx_params*>(p);
      if (!a->config) return false;
      const CUlaunchConfig* c = a->config;
      *v = {a->f, {c->gridDimX, c->gridDimY, c->gridDimZ},
            {c->blockDimX, c->blockDimY, c->blockDimZ}, c->sharedMemBytes, c->hStream,
            a->kernelParams, a->extra};
      return true;
    }
    default:
      return false;
  }
}

// The bytes of parameter i: from kernelParams, or from the `extra` packed buffer.
bool param_bytes(const LaunchView& v, size_t i, size_t offset, size_t size,
                 std::vector<unsigned char>* out) {
  const unsigned char* src = nullptr;
  if (v.params) {
    src = static_cast<const unsigned char*>(v.params[i]);
  } else if (v.extra) {
    void* buffer = nullptr;
    size_t buffer_size = 0;
    for (size_t k = 0; v.extra[k] != CU_LAUNCH_PARAM_END; k += 2) {
      if (v.extra[k] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = v.extra[k + 1];
      if (v.extra[k] == CU_LAUNCH_PARAM_BUFFER_SIZE && v.extra[k + 1])
        buffer_size = *static_cast<size_t*>(v.extra[k + 1]);
    }
    if (buffer && offset + size <= buffer_size) src = static_cast<unsigned char*>(buffer) + offset;
  }
  if (!src) return false;
  out->assign(src, src + size);
  return true;
}

// The device (or managed) allocation holding `addr`; false for anything else (a scalar that
// is no address, host memory CUDA does not know).
bool allocation_of(CUdeviceptr addr, CUdeviceptr* start, size_t* range) {
  return p_cuPointerGetAttribute(start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, addr) ==
             CUDA_SUCCESS &&
         p_cuPointerGetAttribute(range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, addr) == CUDA_SUCCESS;
}

void capture_enter(const LaunchView& v, const std::string& mangled, const std::string& demangled) {
  Pending& p = g_pending;
  p = Pending();
  p.mangled = mangled;
  p.demangled = demangled;
  for (int k = 0; k < 3; k++) {
    p.grid[k] = v.grid[k];
    p.block[k] = v.block[k];
  }
  p.smem = v.smem;
  p.stream = v.stream;
  if (!p_cuFuncGetParamInfo) {
    fail("this driver has no cuFuncGetParamInfo (CUDA 12.4 or newer is needed to capture)");
    return;
  }
  // The runtime may launch a CUkernel handle as a CUfunction (CUDA 12+): its layout then
  // comes from cuKernelGetParamInfo. Index 0 failing with INVALID_VALUE: no parameters.
  size_t offset0 = 0, size0 = 0;
  CUresult first = p_cuFuncGetParamInfo(v.f, 0, &offset0, &size0);
  bool kernel_api = false;
  if (first != CUDA_SUCCESS && first != CUDA_ERROR_INVALID_VALUE && p_cuKernelGetParamInfo) {
    CUresult other =
        p_cuKernelGetParamInfo(reinterpret_cast<CUkernel>(v.f), 0, &offset0, &size0);
    if (other == CUDA_SUCCESS || other == CUDA_ERROR_INVALID_VALUE) {
      kernel_api = true;
      first = other;
    }
  }
  if (first != CUDA_SUCCESS && first != CUDA_ERROR_INVALID_VALUE) {
    fail(cu_error("reading the kernel's parameter layout (cuFuncGetParamInfo)", first));
    return;
  }
  for (size_t i = 0;; i++) {
    size_t offset = 0, size = 0;
    CUresult got = kernel_api ? p_cuKernelGetParamInfo(reinterpret_cast<CUkernel>(v.f), i,
                                                       &offset, &size)
                              : p_cuFuncGetParamInfo(v.f, i, &offset, &size);
    if (got != CUDA_SUCCESS) break;
    Pending::Param param;
    param.offset = offset;
    param.size = size;
    if (!param_bytes(v, i, offset, size, &param.raw)) {
      fail("the launch's parameters could not be read (neither kernelParams nor extra)");
      return;
    }
    p.params.push_back(param);
  }
  CUresult r = p_cuCtxSynchronize();
  if (r != CUDA_SUCCESS) {
    fail(cu_error("cuCtxSynchronize before the launch", r));
    return;
  }
  unsigned long long total = 0;
  size_t embedded = 0;
  for (auto& param : p.params) {
    // A pointer parameter is 8 bytes; a struct passed by value (an iterator, a tensor view, a
    // Params block) holds its pointers at 8-byte-aligned offsets: each word CUDA knows as a
    // device address is recorded like a pointer parameter, for the spec to relocate.
    for (size_t at = 0; at + 8 <= param.size && at + 8 <= param.raw.size(); at += 8) {
      CUdeviceptr addr = 0;
      std::memcpy(&addr, param.raw.data() + at, 8);
      if (!addr) continue;
      CUdeviceptr start = 0;
      size_t range = 0;
      if (!allocation_of(addr, &start, &range)) {
        // one past the end of an allocation (an `end()` iterator, `hi = lo + n`): recorded with
        // no bytes, so the spec can place it at the same distance from the allocation's start
        if (!allocation_of(addr - 1, &start, &range) || addr != start + range) continue;
      } else if (addr < start || addr >= start + range) {
        continue;
      }
      if (param.size != 8 && ++embedded > kMaxEmbedded) continue;
      Pending::Region region;
      region.at = at;
      region.base = start;
      region.addr = addr;
      region.alloc = range;
      region.captured = static_cast<size_t>(start + range - addr);
      total += 2ULL * region.captured;
      param.pointer = param.size == 8;
      param.regions.push_back(std::move(region));
    }
  }
  if (embedded > kMaxEmbedded) {
    fail("the launch's by-value parameters hold " + std::to_string(embedded) +
         " device addresses, more than the " + std::to_string(kMaxEmbedded) +
         " a capture records");
    return;
  }
  if (total > g_settings.max_bytes) {
    fail("the launch's buffers need " + std::to_string(total) +
         " bytes (before and after), more than --max-bytes " +
         std::to_string(g_settings.max_bytes));
    return;
  }
  for (auto& param : p.params) {
    for (auto& region : param.regions) {
      region.before.resize(region.captured);
      if (!region.captured) continue;  // one past the end: no bytes
      r = copy_out(region.before.data(), region.addr, region.captured);
      if (r != CUDA_SUCCESS) {
        fail(cu_error("copying a buffer before the launch", r));
        return;
      }
    }
  }
  p.start = p.end = nullptr;
  if (p_cuEventCreate(&p.start, CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
      p_cuEventCreate(&p.end, CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
      p_cuEventRecord(p.start, p.stream) == CUDA_SUCCESS) {
  } else {
    p.start = p.end = nullptr;
  }
  p.t0 = std::chrono::steady_clock::now();
  p.active = true;
}

double finish_timing(Pending& p) {
  double ms = -1.0;
  if (p.start && p.end && p_cuEventRecord(p.end, p.stream) == CUDA_SUCCESS &&
      p_cuEventSynchronize(p.end) == CUDA_SUCCESS) {
    float f = 0;
    if (p_cuEventElapsedTime(&f, p.start, p.end) == CUDA_SUCCESS) ms = f;
  }
  CUresult r = p_cuCtxSynchronize();
  if (ms < 0) {
    auto t1 = std::chrono::steady_clock::now();
    ms = std::chrono::duration<double, std::milli>(t1 - p.t0).count();
  }
  if (p.start) p_cuEventDestroy(p.start);
  if (p.end) p_cuEventDestroy(p.end);
  p.start = p.end = nullptr;
  return r == CUDA_SUCCESS ? ms : -1.0;
}

void capture_exit() {
  Pending& p = g_pending;
  p.active = false;
  g_done = true;
  double ms = finish_timing(p);
  if (ms < 0) {
    fail("the captured launch failed (the kernel faulted or the context is lost)");
    return;
  }
  std::string params_json;
  std::vector<unsigned char> after;
  for (size_t i = 0; i < p.params.size(); i++) {
    auto& param = p.params[i];
    std::string hex;
    for (unsigned char c : param.raw) {
      char b[3];
      std::snprintf(b, sizeof b, "%02x", c);
      hex += b;
    }
    std::string entry = "{\"index\": " + std::to_string(i) +
                        ", \"offset\": " + std::to_string(param.offset) +
                        ", \"size\": " + std::to_string(param.size) + ", \"bytes\": \"" + hex +
                        "\"";
    std::string embedded_json;
    for (auto& region : param.regions) {
      after.resize(region.captured);
      CUresult r = region.captured ? copy_out(after.data(), region.addr, region.captured)
                                   : CUDA_SUCCESS;
      if (r != CUDA_SUCCESS) {
        fail(cu_error("copying a buffer after the launch", r));
        return;
      }
      std::string stem = "p" + std::to_string(i);
      if (!param.pointer) stem += "_" + std::to_string(region.at);
      std::string b = stem + ".before.bin";
      std::string a = stem + ".after.bin";
      if (!write_file(b, region.before.data(), region.before.size()) ||
          !write_file(a, after.data(), after.size())) {
        fail("cannot write the buffers into " + g_settings.out);
        return;
      }
      bool changed = region.captured &&
                     std::memcmp(region.before.data(), after.data(), region.captured) != 0;
      std::vector<unsigned char>().swap(region.before);
      std::string pointer = "{\"base\": " + std::to_string(region.base) +
                            ", \"offset\": " + std::to_string(region.addr - region.base) +
                            ", \"size\": " + std::to_string(region.alloc) +
                            ", \"captured\": " + std::to_string(region.captured) +
                            ", \"before\": \"" + b + "\", \"after\": \"" + a +
                            "\", \"changed\": " + (changed ? "true" : "false") + "}";
      if (param.pointer) {
        entry += ", \"pointer\": " + pointer;
      } else {
        if (!embedded_json.empty()) embedded_json += ", ";
        embedded_json += "{\"at\": " + std::to_string(region.at) + ", \"pointer\": " + pointer + "}";
      }
    }
    if (!embedded_json.empty()) entry += ", \"embedded\": [" + embedded_json + "]";
    entry += "}";
    if (i) params_json += ",\n    ";
    params_json += entry;
  }
  std::string device_name;
  int major = 0, minor = 0;
  CUdevice dev = 0;
  if (p_cuCtxGetDevice(&dev) == CUDA_SUCCESS) {
    char name[256] = {0};
    if (p_cuDeviceGetName(name, sizeof name - 1, dev) == CUDA_SUCCESS) device_name = name;
    p_cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    p_cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  }
  char ms_text[64];
  std::snprintf(ms_text, sizeof ms_text, "%.6f", ms);
  std::string m = "{\n  \"version\": 1,\n  \"mangled\": \"" + json_escape(p.mangled) +
                  "\",\n  \"demangled\": \"" + json_escape(p.demangled) +
                  "\",\n  \"launch\": " + std::to_string(g_settings.launch) +
                  ",\n  \"grid\": [" + std::to_string(p.grid[0]) + ", " +
                  std::to_string(p.grid[1]) + ", " + std::to_string(p.grid[2]) +
                  "],\n  \"block\": [" + std::to_string(p.block[0]) + ", " +
                  std::to_string(p.block[1]) + ", " + std::to_string(p.block[2]) +
                  "],\n  \"smem\": " + std::to_string(p.smem) + ",\n  \"device\": \"" +
                  json_escape(device_name) + "\",\n  \"arch\": \"sm_" + std::to_string(major) +
                  std::to_string(minor) + "\",\n  \"duration_ms\": " + ms_text +
                  ",\n  \"params\": [\n    " + params_json + "\n  ]\n}\n";
  if (!write_text("manifest.json", m)) {
    fail("cannot write the manifest into " + g_settings.out);
    return;
  }
  write_seen();
}

void CUPTIAPI callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                       const void* data) {
  auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (info->callbackSite == CUPTI_API_ENTER) {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_runtime_launches++;
    }
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || t_inside) return;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch ||
      cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) {
    if (info->callbackSite == CUPTI_API_ENTER) {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_graph_launches++;
    }
    return;
  }
  LaunchView v;
  if (!view_of(cbid, info->functionParams, &v)) return;
  if (!v.stream && per_thread(cbid)) v.stream = CU_STREAM_PER_THREAD;
  t_inside = true;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (info->callbackSite == CUPTI_API_EXIT) {
    if (g_pending.active && info->correlationData && *info->correlationData == 1) {
      *info->correlationData = 0;
      const CUresult* result = static_cast<const CUresult*>(info->functionReturnValue);
      if (result && *result != CUDA_SUCCESS) {
        g_pending.active = false;
        finish_timing(g_pending);
        if (!g_settings.time_mode) fail(cu_error("the captured launch itself", *result));
      } else if (g_settings.time_mode) {
        g_pending.active = false;
        double ms = finish_timing(g_pending);
        g_times.emplace_back(g_matched, ms);
      } else {
        capture_exit();
      }
    }
    t_inside = false;
    return;
  }
  // a launch being recorded into a graph (stream capture) does not run now, and a synchronise
  // would break the capture: counted, never captured
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  if (p_cuStreamIsCapturing && p_cuStreamIsCapturing(v.stream, &capturing) == CUDA_SUCCESS &&
      capturing != CU_STREAM_CAPTURE_STATUS_NONE) {
    g_recorded++;
    if (info->correlationData) *info->correlationData = 0;
    t_inside = false;
    return;
  }
  const char* sym = info->symbolName;
  if (!sym && p_cuFuncGetName) p_cuFuncGetName(&sym, v.f);
  std::string mangled = sym ? sym : "?";
  std::string demangled = demangle(mangled.c_str());
  long& count = g_seen[demangled];
  if (count++ == 0) write_seen();  // a new kernel: seen.json survives a later crash
  if (info->correlationData) *info->correlationData = 0;
  if (g_done) {
    t_inside = false;
    return;
  }
  const std::string& want = g_settings.kernel;
  bool match = want.empty() || mangled.find(want) != std::string::npos ||
               demangled.find(want) != std::string::npos;
  if (match) {
    g_matched++;
    if (g_settings.time_mode) {
      Pending& p = g_pending;
      p = Pending();
      p.stream = v.stream;
      if (g_times_kernel.empty()) g_times_kernel = demangled;
      if (p_cuCtxSynchronize() == CUDA_SUCCESS &&
          p_cuEventCreate(&p.start, CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
          p_cuEventCreate(&p.end, CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
          p_cuEventRecord(p.start, p.stream) == CUDA_SUCCESS) {
      } else {
        p.start = p.end = nullptr;
      }
      p.t0 = std::chrono::steady_clock::now();
      p.active = true;
      if (info->correlationData) *info->correlationData = 1;
    } else if (g_matched == g_settings.launch) {
      capture_enter(v, mangled, demangled);
      if (g_pending.active && info->correlationData) *info->correlationData = 1;
    }
  }
  t_inside = false;
}

bool load_driver() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) return false;
  CL_LOAD(h, cuCtxSynchronize);
  CL_LOAD(h, cuMemcpy);
  CL_LOAD(h, cuMemcpyDtoH);
  CL_LOAD(h, cuPointerGetAttribute);
  CL_LOAD(h, cuFuncGetParamInfo);
  CL_LOAD(h, cuFuncGetName);
  CL_LOAD(h, cuKernelGetParamInfo);
  CL_LOAD(h, cuEventCreate);
  CL_LOAD(h, cuEventRecord);
  CL_LOAD(h, cuEventSynchronize);
  CL_LOAD(h, cuEventElapsedTime);
  CL_LOAD(h, cuEventDestroy);
  CL_LOAD(h, cuCtxGetDevice);
  CL_LOAD(h, cuDeviceGetName);
  CL_LOAD(h, cuDeviceGetAttribute);
  CL_LOAD(h, cuStreamIsCapturing);
  if (!p_cuEventElapsedTime)  // a driver before cuEventElapsedTime_v2 (CUDA 12.8)
    p_cuEventElapsedTime =
        reinterpret_cast<decltype(&cuEventElapsedTime)>(dlsym(h, "cuEventElapsedTime"));
  if (!p_cuEventDestroy)
    p_cuEventDestroy = reinterpret_cast<decltype(&cuEventDestroy)>(dlsym(h, "cuEventDestroy"));
  return p_cuCtxSynchronize && p_cuMemcpy && p_cuPointerGetAttribute && p_cuEventCreate &&
         p_cuEventRecord && p_cuEventSynchronize && p_cuEventElapsedTime && p_cuEventDestroy &&
         p_cuCtxGetDevice && p_cuDeviceGetName && p_cuDeviceGetAttribute;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static bool initialized = false;
  if (initialized) return 1;
  initialized = true;
  const char* out = std::getenv("CUDA_LLM_CAPTURE_OUT");
  if (!out || !*out) return 1;  // not asked to capture: stay out of the way
  g_settings.out = out;
  if (const char* k = std::getenv("CUDA_LLM_CAPTURE_KERNEL")) g_settings.kernel = k;
  if (const char* n = std::getenv("CUDA_LLM_CAPTURE_LAUNCH")) {
    long value = std::strtol(n, nullptr, 10);
    if (value >= 1) g_settings.launch = value;
  }
  if (const char* m = std::getenv("CUDA_LLM_CAPTURE_MODE"))
    g_settings.time_mode = std::strcmp(m, "time") == 0;
  if (const char* b = std::getenv("CUDA_LLM_CAPTURE_MAX_BYTES")) {
    unsigned long long value = std::strtoull(b, nullptr, 10);
    if (value > 0) g_settings.max_bytes = value;
  }
  std::atexit(at_exit);
  if (!load_driver()) {
    fail("the capture library could not reach the CUDA driver's functions (libcuda.so.1)");
    return 1;
  }
  CUpti_SubscriberHandle subscriber;
  CUptiResult r = cuptiSubscribe(&subscriber, reinterpret_cast<CUpti_CallbackFunc>(callback),
                                 nullptr);
  if (r != CUPTI_SUCCESS) {
    fail("cuptiSubscribe failed (" + std::to_string(static_cast<int>(r)) +
         "): another profiler (Nsight) may be attached");
    return 1;
  }
  const CUpti_CallbackId ids[] = {
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
      CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
  };
  for (CUpti_CallbackId id : ids) {
    r = cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
    if (r != CUPTI_SUCCESS) {
      fail("cuptiEnableCallback failed (" + std::to_string(static_cast<int>(r)) + ")");
      return 1;
    }
  }
  const CUpti_CallbackId runtime_ids[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
  };
  for (CUpti_CallbackId id : runtime_ids)  // counted only: a diagnostic if the driver's miss
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  return 1;
}
