// The declarations HTTP API (/api/v1/declarations) over the detector's declaration store:
// JSON in, JSON out.
#pragma once

#include <memory>

#include "detector/output/exporter.h"
#include "suppressors/declaration_store.h"

namespace sbd {

/// Sets the list, add and remove handlers of `sources` to answer from `store`, which they
/// keep. A refused change answers {"errors": [...]} with 400 (invalid), 404 (no such id),
/// 409 (a conflict with the store) or 500 (not persisted). The handlers are thread-safe.
void SetDeclarationsApi(std::shared_ptr<DeclarationStore> store, Exporter::Sources* sources);

}  // namespace sbd
