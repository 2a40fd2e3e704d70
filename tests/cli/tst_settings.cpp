// The settings file (core/settings): defaults, where it lives, round trip, partial files and
// rules files, errors that name the file and the key; then the CLI reading it (report, collapse,
// state, export) and, where the widgets are built, the GUI's rules editor writing it.
#include "../analysis/builder.h"
#include "core/settings/settings.h"
#include "testutil.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "widgets/panels.h"

using namespace fs;
using fstest::runCli;

class TstSettings : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;
    QString session_;

    QString file(const QString& name, const QByteArray& content)
    {
        const QString p = dir_.path() + "/" + name;
        QFile f(p);
        if (!f.open(QIODevice::WriteOnly)) return {};
        f.write(content);
        return p;
    }

    static QJsonObject json(const fstest::CliResult& r)
    {
        return QJsonDocument::fromJson(r.out).object();
    }

    // First frames of every collapse `report --json` lists.
    static QList<int> collapseStarts(const fstest::CliResult& r)
    {
        QList<int> out;
        for (const auto& c : json(r)["collapses"].toArray())
            out << c.toObject()["collapse"].toObject()["first_frame"].toInt();
        return out;
    }

    // The error a bad settings file gives, from settings::read.
    static QString readError(const QString& path)
    {
        try {
            settings::read(path.toStdString());
        } catch (const std::exception& e) {
            return QString::fromStdString(e.what());
        }
        return {};
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        // The user's settings file of this test process and every CLI it runs.
        qunsetenv("FRAGSCOPE_SETTINGS");
        qputenv("XDG_CONFIG_HOME", (dir_.path() + "/config").toLocal8Bit());
        // Frames 0..3 with coherence_score 0.9, 0.3, 0.02, 0.9; a 1 MiB segment, one 256 KiB
        // block allocated in frame 1 (t=1100) and freed in frame 3 (t=3100).
        using namespace antest;
        session_ = dir_.path() + "/frames.fragscope";
        Ingest in(options(session_.toStdString()));
        in.begin();
        in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
        const double coherence[] = {0.9, 0.3, 0.02, 0.9};
        for (int i = 0; i < 4; ++i) {
            mark(in, 1000 * i, "frame " + std::to_string(i));
            mark(in, 1000 * i + 1, "metric coherence_score=" + std::to_string(coherence[i]));
        }
        in.add(ev(EventType::Alloc, 1100, kBase, 256 * KiB));
        in.add(ev(EventType::Free, 3100, kBase));
        mark(in, 4000, "end");
        in.end();
    }

    void defaults()
    {
        const settings::Settings s;
        QCOMPARE(s.rules.size(), analysis::defaultCollapseRules().size());
        QCOMPARE(s.rules[0].rule.metric, std::string("coherence_score"));
        QCOMPARE(s.rules[0].rule.threshold, 0.05);
        QVERIFY(s.rules[0].rule.compare == analysis::Compare::Less);
        QCOMPARE(s.lookbackFrames, int64_t(2));
        QCOMPARE(s.entropyWindowNs, int64_t(300000000000));
        QCOMPARE(s.burstGapNs, int64_t(5000000));
        QCOMPARE(s.timelineStepNs, int64_t(0));
        QCOMPARE(s.framePattern, IngestOptions().framePattern);
        // DESIGN: fragmented means F > 0.35 and free >= 5 % of reserved.
        QCOMPARE(s.fragmented.minRatio, 0.35);
        QCOMPARE(s.fragmented.minFreeShare, 0.05);
        const analysis::LoadOptions lo = s.loadOptions();
        QCOMPARE(lo.rules.size(), s.rules.size());
        QCOMPARE(lo.entropyWindowNs, s.entropyWindowNs);
    }

    void defaultPath()
    {
        const QByteArray xdg = qgetenv("XDG_CONFIG_HOME");
        QCOMPARE(QString::fromStdString(settings::defaultPath()),
                 QString(xdg) + "/fragscope/settings.json");
        qputenv("FRAGSCOPE_SETTINGS", "/elsewhere/s.json");
        QCOMPARE(settings::defaultPath(), std::string("/elsewhere/s.json"));
        qunsetenv("FRAGSCOPE_SETTINGS");
        qunsetenv("XDG_CONFIG_HOME");
        const QByteArray home = qgetenv("HOME");
        qputenv("HOME", "/home/someone");
        QCOMPARE(settings::defaultPath(),
                 std::string("/home/someone/.config/fragscope/settings.json"));
        qputenv("HOME", home);
        qputenv("XDG_CONFIG_HOME", xdg);
    }

    void roundTrip()
    {
        settings::Settings s;
        s.rules[1].enabled = false;
        s.rules.push_back({{"my_metric", analysis::Compare::Greater, 1.0 / 3.0}, true});
        s.lookbackFrames = 4;
        s.entropyWindowNs = 60000000001;
        s.timelineStepNs = 250000000;
        s.burstGapNs = 7;
        s.framePattern = R"(^step (\d+)$)";
        s.fragmented = {0.5, 0.125};
        const QString p = dir_.path() + "/nested/dir/rt.json";
        settings::write(s, p.toStdString()); // creates the folders
        const settings::Settings back = settings::read(p.toStdString());
        QVERIFY(back == s);
        // Disabled rules stay in the file but are not evaluated.
        QCOMPARE(back.activeRules().size(), s.rules.size() - 1);
        QVERIFY(!QFile::exists(p + ".tmp" + QString::number(QCoreApplication::applicationPid())));
    }

    void partialAndRulesFiles()
    {
        // A partial file changes only what it names.
        const QString part = file("part.json", R"({"precursor_lookback_frames": 5})");
        settings::Settings s = settings::read(part.toStdString());
        settings::Settings expected;
        expected.lookbackFrames = 5;
        QVERIFY(s == expected);
        // A bare array is a rules file; over a base it replaces the rules only.
        const QString rules =
            file("rules.json", R"([{"metric": "flow_l2_px", "compare": ">", "threshold": 3}])");
        s = settings::read(rules.toStdString(), s);
        QCOMPARE(s.rules.size(), size_t(1));
        QCOMPARE(s.rules[0].rule.metric, std::string("flow_l2_px"));
        QVERIFY(s.rules[0].rule.compare == analysis::Compare::Greater);
        QCOMPARE(s.lookbackFrames, int64_t(5));
        // No file: the defaults.
        QVERIFY(settings::loadUser((dir_.path() + "/none.json").toStdString()) ==
                settings::Settings());
    }

    void errors_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<QString>("expected");
        QTest::newRow("unknown key") << QByteArray(R"({"lookback": 3})") << "\"lookback\"";
        QTest::newRow("bad compare")
            << QByteArray(
                   R"({"collapse_rules": [{"metric": "m", "compare": "<=", "threshold": 1}]})")
            << "collapse_rules[0].compare";
        QTest::newRow("no threshold")
            << QByteArray(R"({"collapse_rules": [{"metric": "m", "compare": "<"}]})")
            << "collapse_rules[0].threshold";
        QTest::newRow("negative lookback")
            << QByteArray(R"({"precursor_lookback_frames": -1})") << "precursor_lookback_frames";
        QTest::newRow("zero window")
            << QByteArray(R"({"entropy_window_ns": 0})") << "entropy_window_ns";
        QTest::newRow("bad regex")
            // no raw string here: moc misreads one with an unbalanced parenthesis
            << QByteArray("{\"frame_pattern\": \"frame (\\\\d+\"}") << "frame_pattern";
        QTest::newRow("no group") << QByteArray(R"({"frame_pattern": "frame"})") << "group";
        QTest::newRow("version") << QByteArray(R"({"version": 2})") << "version";
        QTest::newRow("share above 1")
            << QByteArray(R"({"fragmented_min_free_share": 5})") << "fragmented_min_free_share";
        QTest::newRow("ratio not a number")
            << QByteArray(R"({"fragmented_min_ratio": "high"})") << "fragmented_min_ratio";
        QTest::newRow("truncated") << QByteArray(R"({"collapse_rules": [)") << "offset";
        QTest::newRow("not json") << QByteArray("lookback=2") << "offset";
    }

    void errors()
    {
        QFETCH(QByteArray, content);
        QFETCH(QString, expected);
        const QString p = file("bad.json", content);
        const QString err = readError(p);
        QVERIFY2(err.contains("bad.json"), qPrintable(err));
        QVERIFY2(err.contains(expected), qPrintable(err));
    }

    void parseDuration()
    {
        QCOMPARE(settings::parseDuration("300s"), int64_t(300000000000));
        QCOMPARE(settings::parseDuration("5ms"), int64_t(5000000));
        QCOMPARE(settings::parseDuration("1.5min"), int64_t(90000000000));
        QCOMPARE(settings::parseDuration("1234"), int64_t(1234));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, settings::parseDuration("5 parsecs"));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, settings::parseDuration("-3s"));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, settings::parseDuration("end"));
    }

    void cliReadsTheUserFile()
    {
        const QString user = QString::fromStdString(settings::defaultPath());
        QFile::remove(user);
        // Defaults: coherence_score < 0.05 breaks in frame 2 only.
        auto r = runCli({"report", session_, "--json"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(collapseStarts(r), QList<int>{2});
        QCOMPARE(runCli({"collapse", session_, "--frame", "1"}).exitCode, 1); // not a collapse

        // The user's file: coherence_score < 0.5 breaks in frames 1 and 2 -> one collapse 1-2.
        settings::Settings s;
        s.rules = {{{"coherence_score", analysis::Compare::Less, 0.5}, true}};
        settings::write(s, user.toStdString());
        r = runCli({"report", session_, "--json"});
        QCOMPARE(collapseStarts(r), QList<int>{1});
        QCOMPARE(json(r)["rules"].toArray()[0].toString(), QString("coherence_score < 0.5"));
        QCOMPARE(runCli({"collapse", session_, "--frame", "1"}).exitCode, 0);

        // --rules FILE over it: coherence_score > 0.5 breaks in frames 0 and 3 (two collapses).
        const QString rules =
            file("gt.json", R"([{"metric": "coherence_score", "compare": ">", "threshold": 0.5}])");
        r = runCli({"report", session_, "--json", "--rules", rules});
        QCOMPARE(collapseStarts(r), (QList<int>{0, 3}));
        // --settings FILE instead of the user's; a missing one is an error naming it.
        const QString other = file("other.json", R"({"precursor_lookback_frames": 1})");
        r = runCli({"report", session_, "--json", "--settings", other});
        QCOMPARE(collapseStarts(r), QList<int>{2});
        r = runCli({"report", session_, "--settings", dir_.path() + "/missing.json"});
        QCOMPARE(r.exitCode, 2);
        QVERIFY(r.err.contains("missing.json"));
        // A broken user file is an error naming it, not silently the defaults.
        file("config/fragscope/settings.json", R"({"collapse_rules": 3})");
        r = runCli({"report", session_});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("settings.json") && r.err.contains("collapse_rules"),
                 r.err.constData());
        QFile::remove(user);
    }

    void entropyWindowReachesStateAndExport()
    {
        // The window the settings name reaches `state` (which echoes it) and `export timeline`.
        const QString user = QString::fromStdString(settings::defaultPath());
        settings::Settings s;
        s.entropyWindowNs = 2001;
        settings::write(s, user.toStdString());
        auto r = runCli({"state", session_, "--at", "3100", "--json"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(json(r)["states"].toArray()[0].toObject()["entropy_window_ns"].toInteger(),
                 qint64(2001));
        // The flag beats the file.
        r = runCli({"state", session_, "--at", "3100", "--json", "--entropy-window", "5us"});
        QCOMPARE(json(r)["states"].toArray()[0].toObject()["entropy_window_ns"].toInteger(),
                 qint64(5000));
        // export timeline uses the same window, so its rows still equal state's.
        const QString csv = dir_.path() + "/w.json";
        r = runCli({"export", "timeline", session_, "-o", csv, "--step", "100"});
        QCOMPARE(r.exitCode, 0);
        QFile f(csv);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(QJsonDocument::fromJson(f.readAll()).object()["entropy_window_ns"].toInteger(),
                 qint64(2001));
        QFile::remove(user);
    }

    void importReadsFramePattern()
    {
        // A Kineto trace whose annotations say "step N": frames only with that pattern.
        const QString trace = file(
            "steps.json",
            R"({"traceEvents":[)"
            R"({"ph":"X","cat":"user_annotation","name":"step 0","ts":10,"dur":10,"pid":1,"tid":1},)"
            R"({"ph":"X","cat":"user_annotation","name":"step 1","ts":20,"dur":10,"pid":1,"tid":1},)"
            R"({"ph":"i","name":"[memory]","ts":12,"pid":1,"tid":1,"args":{"Addr":4096,)"
            R"("Bytes":512,"Total Allocated":512,"Device Id":0,"Device Type":1}}]})");
        const QString out = dir_.path() + "/steps.fragscope";
        auto r = runCli({"import", trace, "-o", out});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QCOMPARE(json(runCli({"info", out, "--json"}))["frames"].toInt(), 0);
        const QString pat = file("pat.json", R"({"frame_pattern": "^step (\\d+)$"})");
        r = runCli({"import", trace, "-o", out, "--settings", pat});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QCOMPARE(json(runCli({"info", out, "--json"}))["frames"].toInt(), 2);
    }

    void guiEditorWritesTheFile()
    {
        const QString user = QString::fromStdString(settings::defaultPath());
        QFile::remove(user);
        // No file yet: the editor starts from the defaults.
        QCOMPARE(views::RulesEditor::load().size(), analysis::defaultCollapseRules().size());
        views::EditableRule rule;
        rule.rule.metric = "coherence_score";
        rule.rule.compare = analysis::Compare::Less;
        rule.rule.threshold = 0.5;
        views::RulesEditor::save({rule});
        QVERIFY(QFile::exists(user));
        // The CLI now shows the GUI's collapse 1-2, and the editor reads the rule back.
        QCOMPARE(collapseStarts(runCli({"report", session_, "--json"})), QList<int>{1});
        const auto back = views::RulesEditor::load();
        QCOMPARE(back.size(), size_t(1));
        QCOMPARE(back[0].rule.threshold, 0.5);
        // The editor keeps the file's other settings.
        settings::Settings s = settings::read(user.toStdString());
        s.lookbackFrames = 7;
        settings::write(s, user.toStdString());
        views::RulesEditor::save({rule});
        QCOMPARE(settings::read(user.toStdString()).lookbackFrames, int64_t(7));
        QFile::remove(user);
    }
};

QTEST_GUILESS_MAIN(TstSettings)
#include "tst_settings.moc"
