// The command-line flags of a program that calls the server (yirage-client,
// yirage-worker): its token and TLS files, into a ChannelOptions.
#ifndef YIRAGE_COMMON_CHANNEL_FLAGS_H_
#define YIRAGE_COMMON_CHANNEL_FLAGS_H_

#include "CLI/CLI.hpp"
#include "common/rpc_util.h"

namespace yirage {

// --token-file, --tls-ca, --tls-cert, --tls-key; `peer` names the server
// in the help ("server", "scheduler").
inline void AddChannelFlags(CLI::App& app, const std::string& peer, ChannelOptions* options) {
  app.add_option("--token-file", options->token_file,
                 "file whose first line is the token to send (default: $YIRAGE_TOKEN)");
  app.add_option("--tls-ca", options->tls_ca_path,
                 "PEM roots that signed the " + peer + "'s certificate: connect with TLS");
  app.add_option("--tls-cert", options->tls_cert_path,
                 "PEM certificate to present (a " + peer + " that requires client certificates)");
  app.add_option("--tls-key", options->tls_key_path, "PEM private key of --tls-cert");
}

}  // namespace yirage

#endif  // YIRAGE_COMMON_CHANNEL_FLAGS_H_
