// Progress display: on a terminal, one line redrawn in place with a bar, the
// rate and the ETA; elsewhere (CI, pipes, files) plain lines at each logging
// step so logs stay readable.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace trident {

class Progress {
 public:
  // `unit` names what is counted: "step 40/1872 ... 8.2 steps/s".
  Progress(std::ostream& out, bool terminal, std::string unit = "step")
      : out_(out), terminal_(terminal), unit_(std::move(unit)) {}
  // `status` is the text after the step counter, e.g. "loss 0.41 acc 86.2%".
  void update(std::int64_t step, std::int64_t total, double steps_per_s, const std::string& status, bool log_line);
  // A line that stays (an evaluation, a note); clears the bar first.
  void line(const std::string& text);
  void finish();

  static std::string duration(double seconds);  // "1:02:03" or "2:03"
  // A bar redraws one line with escape codes: only on a terminal that
  // understands them (not a pipe, a file, mpirun's forwarding, TERM=dumb).
  static bool is_terminal(const std::ostream& out);

 private:
  std::ostream& out_;
  bool terminal_;
  std::string unit_;
  bool bar_shown_ = false;
};

}  // namespace trident
