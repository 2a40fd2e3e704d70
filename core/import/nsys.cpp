#include "importer.h"
namespace fs::import {
std::unique_ptr<Importer> makeNsysImporter(const std::string& path, ImportOptions)
{
    throw ImportError(path, "nsys import not implemented yet");
}
} // namespace fs::import
