// The schema of the server's SQLite database: every migration, oldest first.
// `PRAGMA user_version` is the number applied (server/database.h); every store
// that opens the database (JobStore, ChipStore) passes the same list.
#ifndef YIRAGE_SERVER_SCHEMA_H_
#define YIRAGE_SERVER_SCHEMA_H_

#include <string>
#include <vector>

namespace yirage::server {

// Migration i (0-based) takes the database from version i to i + 1; each is a
// list of statements run in one transaction. Never edit a released migration:
// append a new one.
std::vector<std::vector<std::string>> SchemaMigrations();

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_SCHEMA_H_
