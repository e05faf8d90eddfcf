// Plain-text tables for the CLI: each column as wide as its widest cell,
// two spaces apart, the last column unpadded.
#ifndef YIRAGE_CLIENT_TEXT_TABLE_H_
#define YIRAGE_CLIENT_TEXT_TABLE_H_

#include <ostream>
#include <string>
#include <vector>

namespace yirage::client {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  // A row; missing cells are empty, extra cells are kept.
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace yirage::client

#endif  // YIRAGE_CLIENT_TEXT_TABLE_H_
