#include "client/text_table.h"

#include <algorithm>

namespace yirage::client {

void TextTable::Print(std::ostream& out) const {
  std::vector<size_t> width;
  for (const auto& row : rows_) {
    if (row.size() > width.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

}  // namespace yirage::client
