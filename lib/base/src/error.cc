#include "trident/base/error.h"

#include <vector>

#include "trident/base/text.h"

namespace trident {

int exit_code(ErrorKind kind) { return kind == ErrorKind::kBadInput ? kExitBadInput : kExitFailure; }

bool ErrorContext::empty() const {
  return !rank && !stage && !replica && !micro_batch && action.empty() && edge.empty() && field.empty();
}

std::string ErrorContext::describe() const {
  std::vector<std::string> parts;
  if (rank) parts.push_back("rank " + std::to_string(*rank));
  if (stage) parts.push_back("stage " + std::to_string(*stage));
  if (replica) parts.push_back("replica " + std::to_string(*replica));
  if (micro_batch) parts.push_back("micro-batch " + std::to_string(*micro_batch));
  if (!action.empty()) parts.push_back("action " + action);
  if (!edge.empty()) parts.push_back("edge " + edge);
  if (!field.empty()) parts.push_back("field " + field);
  return join(parts, ", ");
}

void ErrorContext::fill(const ErrorContext& outer) {
  if (!rank) rank = outer.rank;
  if (!stage) stage = outer.stage;
  if (!replica) replica = outer.replica;
  if (!micro_batch) micro_batch = outer.micro_batch;
  if (action.empty()) action = outer.action;
  if (edge.empty()) edge = outer.edge;
  if (field.empty()) field = outer.field;
}

Error::Error(ErrorKind kind, std::string message, ErrorContext context)
    : kind_(kind), message_(std::move(message)), context_(std::move(context)) {
  add_context({});
}

Error& Error::add_context(const ErrorContext& outer) {
  context_.fill(outer);
  what_ = context_.empty() ? message_ : context_.describe() + ": " + message_;
  return *this;
}

std::string first_line(const std::exception& e) {
  const std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

}  // namespace trident
