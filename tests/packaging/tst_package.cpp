// The Debian package: build it with CPack, unpack it into a clean root (dpkg-deb -x), check the
// layout, the computed Depends, the desktop integration, and run the binaries from there.
#include "testutil.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

namespace {

struct Run
{
    int code = -1;
    QByteArray out;
};

Run run(const QString& prog, const QStringList& args, const QString& cwd = {},
        int timeoutMs = 480000)
{
    QProcess p;
    if (!cwd.isEmpty()) p.setWorkingDirectory(cwd);
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(prog, args);
    Run r;
    if (!p.waitForStarted(10000)) return r;
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished();
        return r;
    }
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAll();
    return r;
}

} // namespace

class TstPackage : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir work_;
    QString root_;
    QString deb_;

private slots:
    void buildsDeb()
    {
        QVERIFY(work_.isValid());
        const Run r = run("cpack",
                          {"-G", "DEB", "-B", work_.path(), "--config",
                           QStringLiteral(FRAGSCOPE_BINARY_DIR "/CPackConfig.cmake")},
                          QStringLiteral(FRAGSCOPE_BINARY_DIR));
        QVERIFY2(r.code == 0, r.out.constData());
        const QStringList debs = QDir(work_.path()).entryList({"*.deb"});
        QCOMPARE(debs.size(), 1);
        deb_ = work_.path() + "/" + debs.first();
        root_ = work_.path() + "/root";
        const Run x = run("dpkg-deb", {"-x", deb_, root_});
        QVERIFY2(x.code == 0, x.out.constData());
    }

    void dependsAreComputed()
    {
        QVERIFY(!deb_.isEmpty());
        const Run r = run("dpkg-deb", {"-f", deb_, "Depends"});
        QCOMPARE(r.code, 0);
        // dpkg-shlibdeps found the shared libraries the binaries really link.
        for (const char* lib : {"libsqlite3", "libfmt", "libc6", "libqt6core6"})
            QVERIFY2(r.out.contains(lib),
                     qPrintable(QString("Depends lacks %1: %2").arg(lib, r.out)));
        QVERIFY2(r.out.contains("libqt6widgets6"), r.out.constData());
    }

    void layout()
    {
        QVERIFY(!root_.isEmpty());
        QStringList expected = {"usr/bin/fragscope",
                                "usr/share/applications/org.fragscope.Fragscope.desktop",
                                "usr/share/metainfo/org.fragscope.Fragscope.metainfo.xml",
                                "usr/share/mime/packages/org.fragscope.Fragscope.xml",
                                "usr/share/icons/hicolor/scalable/apps/org.fragscope.Fragscope.svg",
                                "usr/share/icons/hicolor/48x48/apps/org.fragscope.Fragscope.png",
                                "usr/share/icons/hicolor/256x256/apps/org.fragscope.Fragscope.png",
                                "usr/share/man/man1/fragscope.1",
                                "usr/share/doc/fragscope/README.md",
                                "usr/share/doc/fragscope/session-format.md"};
        expected << "usr/bin/fragscope-gui"
                 << "usr/share/fragscope/python/fragscope_nvtx.py"
                 << "usr/share/fragscope/python/fragscope_fleet.py";
        // The agent is packaged when capture was built (FRAGSCOPE_CAPTURE).
        if (FRAGSCOPE_HAVE_AGENT) expected << "usr/lib/fragscope/libfragscope-inject.so";
        // The video module likewise (FRAGSCOPE_VIDEO; core/video/module.h).
        if (FRAGSCOPE_HAVE_VIDEO) expected << "usr/lib/fragscope/libfragscope-video.so";
        for (const QString& f : expected)
            QVERIFY2(QFile::exists(root_ + "/" + f), qPrintable("missing in package: " + f));
        // The man page documents every command the CLI lists.
        QFile man(root_ + "/usr/share/man/man1/fragscope.1");
        QVERIFY(man.open(QIODevice::ReadOnly));
        const QByteArray page = man.readAll();
        QVERIFY(page.contains(".SS info"));
        // One section per command of `fragscope --help`, and no section for a non-command.
        const Run help = run(root_ + "/usr/bin/fragscope", {"--help"});
        int commands = 0;
        for (const QByteArray& line : help.out.split('\n'))
            if (line.startsWith("  ") && line.size() > 2 && line[2] != ' ') {
                const QByteArray name = line.mid(2).split(' ').first();
                QVERIFY2(page.contains(".SS " + name), name.constData());
                ++commands;
            }
        QVERIFY(commands >= 14);
        QCOMPARE(page.count(".SS "), qsizetype(commands));
        QVERIFY(page.contains(".TH FRAGSCOPE 1"));
    }

    void desktopIntegrationValidates()
    {
        QVERIFY(!root_.isEmpty());
        const Run d = run("desktop-file-validate",
                          {root_ + "/usr/share/applications/org.fragscope.Fragscope.desktop"});
        QVERIFY2(d.code == 0 && d.out.trimmed().isEmpty(), d.out.constData());
        const Run a = run("appstreamcli",
                          {"validate", "--no-net",
                           root_ + "/usr/share/metainfo/org.fragscope.Fragscope.metainfo.xml"});
        QVERIFY2(a.code == 0, a.out.constData());
    }

    void binariesRunFromTheUnpackedRoot()
    {
        QVERIFY(!root_.isEmpty());
        const Run v = run(root_ + "/usr/bin/fragscope", {"--version"});
        QVERIFY2(v.code == 0, v.out.constData());
        QVERIFY(v.out.startsWith("fragscope "));
        QVERIFY(v.out.contains("SQLite"));
        const Run g = run(root_ + "/usr/bin/fragscope-gui", {"--version"});
        QVERIFY2(g.code == 0, g.out.constData());
        QVERIFY(g.out.contains("fragscope"));
        QStringList bins = {root_ + "/usr/bin/fragscope", root_ + "/usr/bin/fragscope-gui"};
        if (FRAGSCOPE_HAVE_VIDEO) bins << root_ + "/usr/lib/fragscope/libfragscope-video.so";
        // Nothing the binaries link is missing on this system, and none points into the build tree.
        for (const QString& b : bins) {
            const Run l = run("ldd", {b});
            QCOMPARE(l.code, 0);
            QVERIFY2(!l.out.contains("not found"), l.out.constData());
            QVERIFY2(!l.out.contains(FRAGSCOPE_BINARY_DIR), l.out.constData());
        }
    }
};

QTEST_GUILESS_MAIN(TstPackage)
#include "tst_package.moc"
