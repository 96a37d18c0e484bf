// A value of type T that this thread's ops read while a scope is open: the
// runtime opens one around a stage's forwards and backwards (Note [Node
// partitions] in node_parts.h, Note [Node chunks] in node_chunks.h).
#pragma once

#include <memory>

namespace trident::nn {

// Sets this thread's T until it closes; scopes nest (closing restores the
// enclosing scope's value).
template <class T>
class ThreadScope {
 public:
  explicit ThreadScope(std::shared_ptr<const T> value) : previous_(std::move(slot())) { slot() = std::move(value); }
  ~ThreadScope() { slot() = std::move(previous_); }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

  // This thread's T, or null outside every scope.
  static const std::shared_ptr<const T>& current() { return slot(); }

 private:
  static std::shared_ptr<const T>& slot() {
    thread_local std::shared_ptr<const T> value;
    return value;
  }
  std::shared_ptr<const T> previous_;
};

}  // namespace trident::nn
