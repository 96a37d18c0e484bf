#include "trident/base/progress.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include <cmath>
#include <cstdio>
#include <ostream>

namespace trident {

bool Progress::is_terminal(const std::ostream& out) {
  const char* term = std::getenv("TERM");
  if (term && std::string(term) == "dumb") return false;
  return (&out == &std::cout && ::isatty(1)) || (&out == &std::cerr && ::isatty(2));
}

std::string Progress::duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

void Progress::update(std::int64_t step, std::int64_t total, double steps_per_s, const std::string& status,
                      bool log_line) {
  const double eta = steps_per_s > 0 ? static_cast<double>(total - step) / steps_per_s : -1;
  char head[64];
  std::snprintf(head, sizeof head, "%s %lld/%lld", unit_.c_str(), static_cast<long long>(step),
                static_cast<long long>(total));
  const std::string tail = status + " | " + (steps_per_s > 0 ? std::to_string(steps_per_s).substr(0, 5) : "?") +
                           " " + unit_ + "s/s | ETA " + duration(eta);
  if (terminal_) {
    constexpr int kWidth = 24;
    const int filled = total > 0 ? static_cast<int>(kWidth * step / total) : 0;
    std::string bar(filled, '=');
    if (filled < kWidth) bar += '>' + std::string(kWidth - filled - 1, ' ');
    out_ << "\r\033[K" << head << " [" << bar << "] " << tail << std::flush;
    bar_shown_ = true;
  } else if (log_line) {
    out_ << head << " " << tail << "\n" << std::flush;
  }
}

void Progress::line(const std::string& text) {
  if (bar_shown_) out_ << "\r\033[K";
  bar_shown_ = false;
  out_ << text << "\n" << std::flush;
}

void Progress::finish() {
  if (bar_shown_) out_ << "\n" << std::flush;
  bar_shown_ = false;
}

}  // namespace trident
