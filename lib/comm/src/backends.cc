#include "backends.h"

#include <cstdlib>

#include <torch/version.h>

#include "trident/comm/store_backend.h"

// Note [Backends]
// ~~~~~~~~~~~~~~~
// Which c10d backend carries which tensors.
//
//   CPU build (Debian's LibTorch 1.13): Gloo carries every tensor. Its
//   headers ship with that LibTorch and match its library.
//
//   CUDA build (a LibTorch 2.x wheel, TRIDENT_CUDA): one c10d ProcessGroup
//   with a backend per device type, as PyTorch's "cpu:gloo,cuda:nccl" —
//   NCCL for CUDA tensors (gradient sync and stage-to-stage transfers of a
//   GPU run), and for CPU tensors trident's StoreBackend through the
//   rendezvous store, because the wheel ships no Gloo headers and headers
//   from another Gloo revision are unsafe with its library. On a GPU run
//   the CPU tensors are the small control messages (loss sums, preflight
//   strings); a CPU run of the CUDA build works but is slow, and the CPU
//   build is the one to train on CPUs with. NCCL is created only where a
//   GPU is visible; it connects lazily, at its first collective.
//
// No other file includes a backend's header; only this file and
// store_backend.h ask which LibTorch version is underneath.
#if TORCH_VERSION_MAJOR >= 2
#include <torch/cuda.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#else
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

namespace trident::comm {

#if TORCH_VERSION_MAJOR >= 2

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size, std::chrono::milliseconds timeout,
                                                          const std::string&, std::optional<Beats> beats) {
  auto pg = store_process_group(c10::make_intrusive<c10d::PrefixStore>("cpu", store), rank, size, timeout,
                                Matching::kByTag, std::move(beats));
#ifdef USE_C10D_NCCL
  using Type = c10d::ProcessGroup::BackendType;
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
  return "store (CPU tensors), nccl (CUDA tensors)";
#else
  return "store";
#endif
}

#else

namespace {

// Gloo's device: the address `host` (loopback runs), else the interface
// GLOO_SOCKET_IFNAME names — PyTorch's variable, for hosts with several
// interfaces (tools/trident/test/hosts_test.sh runs each rank in a network
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

}  // namespace

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size, std::chrono::milliseconds timeout,
                                                          const std::string& host, std::optional<Beats>) {
  auto opts = c10d::ProcessGroupGloo::Options::create();
  opts->timeout = timeout;
  opts->devices = {device(host)};
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
}

std::string backend_names() { return "gloo"; }

#endif

}  // namespace trident::comm
