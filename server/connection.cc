#include "server/connection.h"

#include "core/status_macros.h"
#include "server/schema.h"

namespace yirage::server {

absl::StatusOr<std::shared_ptr<Connection>> Connection::Open(const std::string& path,
                                                             const std::string& name) {
  YIRAGE_ASSIGN_OR_RETURN(std::unique_ptr<Database> db,
                          Database::Open(path, SchemaMigrations(), name));
  auto connection = std::make_shared<Connection>();
  connection->path = path;
  absl::MutexLock lock(&connection->mu);
  connection->db = std::move(db);
  return connection;
}

}  // namespace yirage::server
