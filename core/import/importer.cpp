#include "importer.h"

#include "core/store/foreign_input.h"

#include <algorithm>
#include <cctype>

namespace fs::import {

std::string_view formatName(Format f)
{
    switch (f) {
    case Format::Auto:
        return "auto";
    case Format::PytorchSnapshot:
        return "pytorch-snapshot";
    case Format::Kineto:
        return "kineto";
    case Format::NsysSqlite:
        return "nsys-sqlite";
    }
    return "?";
}

bool parseFormat(std::string_view s, Format& out)
{
    for (Format f : {Format::Auto, Format::PytorchSnapshot, Format::Kineto, Format::NsysSqlite}) {
        if (s == formatName(f)) {
            out = f;
            return true;
        }
    }
    return false;
}

Format detectFormat(const std::string& path)
{
    ByteReader probe(path); // clear error for a missing or unreadable file
    const std::string head = sniff(path, 4096);
    if (head.empty())
        throw ImportError(path, "offset 0: empty file: expected a PyTorch snapshot, a Kineto trace "
                                "or an nsys SQLite export");
    // The one classification Session::open also goes by (core/store/foreign_input.h).
    switch (store::inputKindOfHead(head)) {
    case store::InputKind::Sqlite:
        if (!probe.compressed()) return Format::NsysSqlite;
        break;
    case store::InputKind::Pickle:
        return Format::PytorchSnapshot;
    case store::InputKind::Json:
        return Format::Kineto;
    case store::InputKind::Unknown:
        break;
    }
    throw ImportError(
        path,
        "offset 0: unrecognised content: expected a PyTorch snapshot pickle (starts with 0x80), "
        "a Kineto/Chrome trace JSON (optionally gzip) or an nsys SQLite export");
}

void Importer::warn(Ingest* ingest, const std::string& message)
{
    report_.warnings.push_back(message);
    if (ingest) ingest->warn(message);
}

std::unique_ptr<Importer> makeImporter(Format f, const std::string& path, ImportOptions opts)
{
    if (f == Format::Auto) f = detectFormat(path);
    switch (f) {
    case Format::PytorchSnapshot:
        return makePytorchSnapshotImporter(path, std::move(opts));
    case Format::Kineto:
        return makeKinetoImporter(path, std::move(opts));
    case Format::NsysSqlite:
        return makeNsysImporter(path, std::move(opts));
    case Format::Auto:
        break;
    }
    throw ImportError(path, "no importer for this format");
}

} // namespace fs::import
