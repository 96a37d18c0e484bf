// See Note [BLAS kernel] in blas.h.
#include "trident/process/blas.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include <torch/torch.h>

#include "trident/process/blas_kernel.h"
#include "trident/base/env.h"
#include "trident/base/files.h"
#include "trident/base/error.h"

extern char** environ;

namespace trident::process {
namespace {

constexpr const char* kChoiceVar = "TRIDENT_BLAS_CHOICE";  // the decision, for this process's children
constexpr const char* kCheckVar = "TRIDENT_BLAS_CHECK";    // set in the check child
constexpr const char* kCoreVar = "OPENBLAS_CORETYPE";
constexpr int kCheckTimeoutS = 120;

// OpenBLAS's own queries, found with dlsym so nothing links against OpenBLAS.
std::string openblas_text(const char* function) {
  using Text = const char* (*)();
  auto fn = reinterpret_cast<Text>(::dlsym(RTLD_DEFAULT, function));
  const char* text = fn ? fn() : nullptr;
  return text ? std::string(text) : std::string();
}

std::string corename() { return openblas_text("openblas_get_corename"); }

// How OpenBLAS runs its threads (openblas_get_parallel: 0 none, 1 its own
// pthreads, 2 OpenMP): see Note [CPU process settings] in process.h.
std::string threading() {
  using Parallel = int (*)();
  auto fn = reinterpret_cast<Parallel>(::dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  if (!fn) return "";
  const int kind = fn();
  return kind == 2 ? " (OpenMP)" : kind == 1 ? " (pthreads)" : " (single-threaded)";
}

std::string first_word_after(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  std::string w;
  while (in >> w)
    if (w == word && in >> w) return w;
  return "";
}

// A product to check: C = op(A)·op(B) with A m×k and B k×n as the product
// sees them, stored transposed where `ta`/`tb` say.
struct Product {
  const char* what;
  std::int64_t m, k, n;
  bool ta, tb;
};

// The shapes of Note [BLAS kernel]: Linear's forward (x·Wᵀ, with a bias) and
// its two gradients, sizes that leave kernel edges, one that spans blocks, and
// a matrix-vector product (n = 1).
const Product kProducts[] = {
    {"addmm 64x784x96 (Linear forward, weight transposed)", 64, 784, 96, false, true},
    {"mm 64x96x784 (input gradient)", 64, 96, 784, false, false},
    {"mm 96x64x784 (weight gradient, activations transposed)", 96, 64, 784, true, false},
    {"mm 7x13x5 (kernel edges)", 7, 13, 5, false, false},
    {"mm 37x300x129 (both transposed)", 37, 300, 129, true, true},
    {"mm 128x512x256 (several blocks)", 128, 512, 256, false, true},
    {"mv 257x129", 257, 129, 1, false, false},
};

// The worst element of `c` against the naive double product, relative to
// its bound; > 1 is out of bounds.
double worst_ratio(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& bias, const torch::Tensor& c) {
  constexpr double u = 1.0 / (1 << 24);
  const auto A = a.contiguous(), B = b.contiguous(), C = c.contiguous();
  const std::int64_t m = A.size(0), k = A.size(1), n = B.size(1);
  const float* pa = A.data_ptr<float>();
  const float* pb = B.data_ptr<float>();
  const float* pc = C.data_ptr<float>();
  const float* pbias = bias.defined() ? bias.data_ptr<float>() : nullptr;
  double worst = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double exact = pbias ? pbias[j] : 0, scale = pbias ? std::fabs(pbias[j]) : 0;
      for (std::int64_t p = 0; p < k; ++p) {
        exact += static_cast<double>(pa[i * k + p]) * pb[p * n + j];
        scale += std::fabs(static_cast<double>(pa[i * k + p]) * pb[p * n + j]);
      }
      const double bound = 2 * (k + 1) * u * scale + u * std::fabs(exact) + 1e-30;
      const double err = std::fabs(pc[i * n + j] - exact);
      worst = std::max(worst, std::isfinite(err) ? err / bound : INFINITY);
    }
  return worst;
}

torch::Tensor product_of(const Product& p, const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& bias) {
  if (p.n == 1) return torch::mv(a, b.reshape({p.k})).reshape({p.m, 1});
  return bias.defined() ? torch::addmm(bias, a, b) : torch::mm(a, b);
}

struct Verdict {
  bool ok = false;
  std::string kernel;  // what the child ran
  std::string why;
};

std::vector<std::string> environment_with(const std::string& kernel) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    if (entry.rfind(std::string(kCoreVar) + "=", 0) == 0 || entry.rfind(std::string(kCheckVar) + "=", 0) == 0)
      continue;
    out.push_back(entry);
  }
  out.push_back(std::string(kCoreVar) + "=" + kernel);
  out.push_back(std::string(kCheckVar) + "=1");
  return out;
}

// Runs this program as a check child with OPENBLAS_CORETYPE=kernel and reads
// its one-line verdict ("ok KERNEL" or "wrong KERNEL WHAT").
Verdict check_in_child(char** argv, const std::string& kernel) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {false, "", "no pipe for the check"};
  auto env = environment_with(kernel);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return {false, "", "the check process did not start"};
  }
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kCheckTimeoutS);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fds[0], POLLIN, 0};
    if (left.count() <= 0 || poll_retrying(&p, 1, static_cast<int>(left.count())) == 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    char buf[512];
    const ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got <= 0) break;
    out.append(buf, static_cast<std::size_t>(got));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (timed_out) return {false, "", "the check did not finish in " + std::to_string(kCheckTimeoutS) + " s"};
  if (WIFSIGNALED(status))
    return {false, "", std::string("the check process died of signal ") + std::to_string(WTERMSIG(status)) + " (" +
                           ::strsignal(WTERMSIG(status)) + ")"};
  std::istringstream line(out);
  std::string verdict, ran;
  line >> verdict >> ran;
  std::string rest;
  std::getline(line, rest);
  if (verdict == "ok") return {true, ran, ""};
  if (verdict == "wrong") return {false, ran, "wrong products: " + rest.substr(std::min(rest.size(), rest.find_first_not_of(' ')))};
  return {false, "", "the check process gave no verdict (exit " + std::to_string(WEXITSTATUS(status)) + ")"};
}

}  // namespace

std::string active_blas() {
  // A matmul makes sure the BLAS library is mapped.
  (void)torch::mm(torch::ones({2, 2}), torch::ones({2, 2}));
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const auto file = std::filesystem::path(path).filename().string();
    if (file.rfind("libblas.so", 0) == 0 || file.rfind("libopenblas", 0) == 0) {
      std::error_code ec;
      auto real = std::filesystem::canonical(path, ec);
      return ec ? path : real.string();
    }
  }
  return "";
}

std::string blas_warning() {
  const auto blas = active_blas();
  if (blas.find("openblas") != std::string::npos || blas.find("mkl") != std::string::npos || at::hasMKL()) return "";
  return "warning: LibTorch is using " + (blas.empty() ? std::string("no shared BLAS") : blas) +
         ", not OpenBLAS: training runs ~30x slower; install libopenblas0-openmp (make deps)";
}

std::string BlasInUse::describe() const {
  std::string out = library;
  if (!kernel.empty()) out += ", kernel " + kernel;
  if (!how.empty()) out += " (" + how + ")";
  if (!libtorch_products.empty()) out += "; LibTorch's products: " + libtorch_products;
  return out;
}

BlasInUse blas_in_use() {
  BlasInUse b;
  const auto config = openblas_text("openblas_get_config");
  if (config.empty()) {
    const auto path = active_blas();
    b.library = at::hasMKL() ? "MKL (inside LibTorch)" : path.empty() ? "no shared BLAS" : path;
    return b;
  }
  b.library = "OpenBLAS " + first_word_after(config, "OpenBLAS") + threading();
  b.kernel = corename();
  // A wheel's LibTorch has MKL inside and calls sgemm_ by its dynamic name:
  // the first library that defines it serves it (Note [One LibTorch]).
  Dl_info where{};
  if (at::hasMKL() && ::dladdr(::dlsym(RTLD_DEFAULT, "sgemm_"), &where) && where.dli_fname &&
      std::string(where.dli_fname).find("libtorch_cpu") != std::string::npos)
    b.libtorch_products = "MKL";
  const auto choice = decode_blas_choice(env_or_empty(kChoiceVar));
  using Verdict = BlasChoice::Verdict;
  if (choice && choice->verdict == Verdict::kChose) {
    b.how = "detected " + choice->detected + "; checked";
  } else if (choice && choice->verdict == Verdict::kUser) {
    b.how = "set by OPENBLAS_CORETYPE=" + choice->kernel + "; checked";
  } else if (choice && choice->verdict == Verdict::kRefused) {
    b.how = "detected; " + choice->kernel + " refused: " + choice->why;
  } else {
    b.how = std::getenv(kCoreVar) ? "set by OPENBLAS_CORETYPE=" + env_or_empty(kCoreVar) : "detected";
  }
  return b;
}

ProductCheck check_products() {
  auto gen = at::detail::createCPUGenerator(20261202);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  ProductCheck out;
  for (const auto& p : kProducts) {
    // Stored as the product reads them: a transposed operand is made k×m and viewed back.
    auto a = p.ta ? at::randn({p.k, p.m}, gen, f32).t() : at::randn({p.m, p.k}, gen, f32);
    auto b = p.tb ? at::randn({p.n, p.k}, gen, f32).t() : at::randn({p.k, p.n}, gen, f32);
    auto bias = std::string(p.what).rfind("addmm", 0) == 0 ? at::randn({p.n}, gen, f32) : torch::Tensor();
    const auto c = product_of(p, a, b, bias);
    const double ratio = worst_ratio(a, b, bias, c);
    if (!(ratio <= 1)) {
      char buf[96];
      std::snprintf(buf, sizeof buf, ": an element off by %.3g times the rounding bound", ratio);
      return {false, std::string(p.what) + buf, ratio};
    }
    out.ratio = std::max(out.ratio, ratio);
  }
  return out;
}

namespace {
void set_choice(const BlasChoice& choice) { ::setenv(kChoiceVar, encode_blas_choice(choice).c_str(), 1); }
}  // namespace

bool choose_blas_kernel(char** argv) {
  if (std::getenv(kCheckVar)) {  // the check child: one line, then exit
    const auto c = check_products();
    std::printf("%s %s %s\n", c.ok ? "ok" : "wrong", corename().c_str(), c.worst.c_str());
    std::fflush(stdout);
    std::_Exit(0);
  }
  const auto detected = corename();
  if (detected.empty() || std::getenv(kChoiceVar)) return false;  // not OpenBLAS, or decided before this process
  if (const char* forced = std::getenv(kCoreVar)) {  // set outside trident: never replaced, but checked
    const auto c = check_products();
    if (!c.ok)
      throw Failure(std::string("OPENBLAS_CORETYPE=") + forced + " (set outside trident) runs OpenBLAS kernel " +
                    detected + ", which computes wrong products (" + c.worst +
                    "); unset OPENBLAS_CORETYPE to let OpenBLAS choose, or name another kernel");
    set_choice({BlasChoice::Verdict::kUser, forced, "", ""});
    return false;
  }
  const auto candidate = better_kernel(detected, this_cpu());
  if (candidate.empty()) {
    set_choice({BlasChoice::Verdict::kKept, detected, "", ""});
    return false;
  }
  auto verdict = check_in_child(argv, candidate);
  const auto ran = kernel_level(verdict.kernel), had = kernel_level(detected);
  if (verdict.ok && !(ran && had && *ran > *had)) {
    verdict.ok = false;
    verdict.why = "OpenBLAS ran " + (verdict.kernel.empty() ? std::string("nothing it named") : verdict.kernel) +
                  " when asked for it";
  }
  if (verdict.ok) {
    ::setenv(kCoreVar, candidate.c_str(), 1);
    set_choice({BlasChoice::Verdict::kChose, candidate, detected, ""});
    return true;
  }
  set_choice({BlasChoice::Verdict::kRefused, candidate, detected, verdict.why});
  std::cerr << "trident: OpenBLAS kernel " << candidate << " refused (" << verdict.why << "); keeping " << detected
            << ", as OpenBLAS detected\n";
  return false;
}

}  // namespace trident::process
