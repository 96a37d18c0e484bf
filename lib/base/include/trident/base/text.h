// Small text helpers shared by the command line, the planner's tables and
// the runtime's messages.
#pragma once

#include <string>
#include <vector>

namespace trident {

// "a, b, c" (with sep ", ").
std::string join(const std::vector<std::string>& parts, const std::string& sep = ", ");

// Binary units, three significant digits: "512 B", "12.0 MiB", "1.50 GiB".
std::string human_bytes(double bytes);

}  // namespace trident

namespace trident {

// printf-style formatting of one number: format_number("%.2f ms", 1.5).
std::string format_number(const char* printf_format, double value);

}  // namespace trident

namespace trident {

// The bytes of standard base64 text (RFC 4648, '=' padding, no line breaks),
// as Python's base64.b64encode writes them; throws InputError
// for any other character or a length that is not a multiple of four.
std::string base64_decode(const std::string& text);
// Its inverse: `bytes` as standard base64 text with '=' padding.
std::string base64_encode(const std::string& bytes);

}  // namespace trident
