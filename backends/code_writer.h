// The line writer the C++-emitting code generators (CPU, CUDA) build kernel
// source with: one line at a time, indented two spaces a level, preprocessor
// lines at column 0.
#ifndef YIRAGE_BACKENDS_CODE_WRITER_H_
#define YIRAGE_BACKENDS_CODE_WRITER_H_

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace yirage::backends {

class CodeWriter {
 public:
  void Line(std::string_view text) {
    if (!text.empty() && text[0] != '#') out_.append(2 * indent_, ' ');
    out_.append(text);
    out_.push_back('\n');
  }
  // Line(absl::StrCat(args...)).
  template <typename... Args>
  void L(const Args&... args) {
    Line(absl::StrCat(args...));
  }
  // A line that opens a block ("for (...) {"); what follows is indented.
  void Open(std::string_view text) {
    Line(text);
    ++indent_;
  }
  void Close(std::string_view text = "}") {
    --indent_;
    Line(text);
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
  int indent_ = 0;
};

}  // namespace yirage::backends

#endif  // YIRAGE_BACKENDS_CODE_WRITER_H_
