#include "backends.h"

#include <cstdlib>

#include "trident/comm/store_backend.h"

#include <torch/cuda.h>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO  // the wheel's libtorch_cpu has Gloo; its header guards on this
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace trident::comm {

namespace {

// Gloo's device: the address `host` (loopback runs), else the interface
// GLOO_SOCKET_IFNAME names — PyTorch's variable, for hosts with several
// interfaces (tools/trident/test/multi_machine_test.sh runs each rank in a network
// namespace of its own) — else the address this host's name resolves to.
std::shared_ptr<gloo::transport::Device> device(const std::string& host) {
  if (!host.empty()) return c10d::ProcessGroupGloo::createDeviceForHostname(host);
  const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
  if (interface && *interface) {
    std::string first = interface;
    first = first.substr(0, first.find(','));  // PyTorch takes a list; one device here
    return c10d::ProcessGroupGloo::createDeviceForInterface(first);
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                std::chrono::milliseconds timeout, const std::string& host) {
  auto opts = c10::make_intrusive<c10d::ProcessGroupGloo::Options>(timeout);
  opts->devices = {device(host)};
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
}

}  // namespace

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size, std::chrono::milliseconds timeout,
                                                          const std::string& host, std::optional<Beats>) {
  using Type = c10d::ProcessGroup::BackendType;
  auto pg = c10::make_intrusive<c10d::ProcessGroup>(store, rank, size);
  pg->setBackend(c10::DeviceType::CPU, Type::GLOO, gloo(c10::make_intrusive<c10d::PrefixStore>("gloo", store), rank, size, timeout, host));
  pg->setDefaultBackend(Type::GLOO);
#ifdef USE_C10D_NCCL
  if (torch::cuda::is_available()) {
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    auto nccl =
        c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>("nccl", store), rank, size, opts);
    pg->setBackend(c10::DeviceType::CUDA, Type::NCCL, nccl);
  }
#endif
  return pg;
}

std::string backend_names() {
#ifdef USE_C10D_NCCL
  return "gloo (CPU tensors), nccl (CUDA tensors)";
#else
  return "gloo";
#endif
}

}  // namespace trident::comm
