// The ns-3 side of `ainet-gym crosscheck` (compiled at run time by cppyy's JIT, see crosscheck.py).
//
// The Python side builds the fabric (nodes, point-to-point links, pinned host routes) and hands this
// orchestrator the jobs: compute time, overlap, start time, and phases of transfers. The orchestrator runs
// the same job timeline as the fluid engine (ainet_gym/engine.py): an iteration computes for `compute`,
// its communication starts after (1 - overlap) * compute and runs the phases in order, each phase's
// transfers as bulk TCP connections (one per routed sub-flow of the transfer's connection); the iteration
// ends when both compute and communication are done and the next one starts at once. Latency is not an
// added alpha term here: the packets pay the links' propagation and serialisation delays.
//
// A transfer of connection c started in decision interval k uses the routing of (c, k): a list of
// sub-flows (source node and address, destination node and address, fraction of the bytes). Pinned
// paths have their own address pair (the switches carry /32 routes for it), sprayed connections use the
// hosts' primary addresses (per-packet random ECMP of Ipv4GlobalRouting).

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace ainet_xc
{

class Orchestrator;

struct XcSub
{
    uint32_t srcNode;
    uint32_t dstNode;
    ns3::Ipv4Address src;
    ns3::Ipv4Address dst;
    double frac;
};

struct XcTransfer
{
    uint32_t conn;
    double bytes;
};

struct XcJob
{
    double compute = 0.0;
    double overlap = 0.0;
    double start = 0.0;
    std::vector<std::vector<XcTransfer>> phases;
    uint32_t phase = 0;
    uint32_t pending = 0;
    double iterStart = 0.0;
    double commStart = 0.0;
    double commEnd = 0.0;
    bool computeDone = false;
    bool commDone = false;
    uint32_t iterations = 0;
    double commSum = 0.0;
    double stepSum = 0.0;
};

struct XcRx
{
    Orchestrator* orch;
    uint32_t job;
    uint64_t need;
    uint64_t got;
    bool done;
    void OnRx(ns3::Ptr<const ns3::Packet> p, const ns3::Address& from);
};

class Orchestrator
{
  public:
    double interval = 1.0;
    uint32_t steps = 1;
    uint32_t sendSize = 14480;
    double wallLimit = 600.0;
    bool timedOut = false;
    uint64_t transfers = 0;
    std::vector<XcJob> jobs;
    std::vector<std::vector<std::vector<XcSub>>> routes; // [conn][step] -> sub-flows
    std::vector<std::unique_ptr<XcRx>> rx;
    uint16_t nextPort = 10000;
    std::chrono::steady_clock::time_point wallStart;

    void Configure(double intervalS, uint32_t nSteps, uint32_t nConns, uint32_t send, double wallLimitS)
    {
        interval = intervalS;
        steps = nSteps;
        sendSize = send;
        wallLimit = wallLimitS;
        routes.assign(nConns, std::vector<std::vector<XcSub>>(nSteps));
    }

    uint32_t AddJob(double compute, double overlap, double start)
    {
        XcJob j;
        j.compute = compute;
        j.overlap = overlap;
        j.start = start;
        jobs.push_back(j);
        return jobs.size() - 1;
    }

    void AddPhase(uint32_t job) { jobs[job].phases.emplace_back(); }

    void AddTransfer(uint32_t job, uint32_t conn, double bytes)
    {
        jobs[job].phases.back().push_back(XcTransfer{conn, bytes});
    }

    void AddSub(uint32_t conn, uint32_t step, uint32_t srcNode, const std::string& src, uint32_t dstNode,
                const std::string& dst, double frac)
    {
        routes[conn][step].push_back(
            XcSub{srcNode, dstNode, ns3::Ipv4Address(src.c_str()), ns3::Ipv4Address(dst.c_str()), frac});
    }

    void Start()
    {
        wallStart = std::chrono::steady_clock::now();
        for (uint32_t j = 0; j < jobs.size(); ++j)
        {
            ns3::Simulator::Schedule(ns3::Seconds(jobs[j].start), &Orchestrator::BeginIteration, this, j);
        }
        ns3::Simulator::Schedule(ns3::MilliSeconds(1), &Orchestrator::Watchdog, this);
    }

    void Watchdog()
    {
        double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
        if (w > wallLimit)
        {
            timedOut = true;
            ns3::Simulator::Stop();
            return;
        }
        ns3::Simulator::Schedule(ns3::MilliSeconds(1), &Orchestrator::Watchdog, this);
    }

    void BeginIteration(uint32_t j)
    {
        XcJob& job = jobs[j];
        job.iterStart = ns3::Simulator::Now().GetSeconds();
        job.computeDone = false;
        job.commDone = false;
        ns3::Simulator::Schedule(ns3::Seconds(job.compute), &Orchestrator::ComputeEnd, this, j);
        ns3::Simulator::Schedule(ns3::Seconds((1.0 - job.overlap) * job.compute), &Orchestrator::CommBegin,
                                 this, j);
    }

    void ComputeEnd(uint32_t j)
    {
        jobs[j].computeDone = true;
        MaybeEnd(j);
    }

    void CommBegin(uint32_t j)
    {
        jobs[j].commStart = ns3::Simulator::Now().GetSeconds();
        jobs[j].phase = 0;
        StartPhase(j);
    }

    void StartPhase(uint32_t j)
    {
        XcJob& job = jobs[j];
        while (job.phase < job.phases.size())
        {
            double now = ns3::Simulator::Now().GetSeconds();
            uint32_t step = std::min<uint32_t>(steps - 1, (uint32_t)std::floor(now / interval + 1e-12));
            job.pending = 0;
            for (const XcTransfer& t : job.phases[job.phase])
            {
                for (const XcSub& s : routes[t.conn][step])
                {
                    uint64_t b = (uint64_t)std::llround(t.bytes * s.frac);
                    if (b == 0)
                    {
                        continue;
                    }
                    job.pending++;
                    Launch(j, s, b);
                }
            }
            if (job.pending > 0)
            {
                return;
            }
            job.phase++;
        }
        job.commEnd = ns3::Simulator::Now().GetSeconds();
        job.commDone = true;
        MaybeEnd(j);
    }

    void Launch(uint32_t j, const XcSub& s, uint64_t bytes)
    {
        uint16_t port = nextPort++;
        if (nextPort > 64000)
        {
            nextPort = 10000;
        }
        transfers++;
        ns3::Ptr<ns3::Node> dn = ns3::NodeList::GetNode(s.dstNode);
        ns3::Ptr<ns3::Node> sn = ns3::NodeList::GetNode(s.srcNode);
        ns3::PacketSinkHelper sink("ns3::TcpSocketFactory", ns3::InetSocketAddress(s.dst, port));
        ns3::ApplicationContainer sa = sink.Install(dn);
        rx.push_back(std::unique_ptr<XcRx>(new XcRx{this, j, bytes, 0, false}));
        sa.Get(0)->TraceConnectWithoutContext("Rx", ns3::MakeCallback(&XcRx::OnRx, rx.back().get()));
        ns3::BulkSendHelper bulk("ns3::TcpSocketFactory", ns3::InetSocketAddress(s.dst, port));
        bulk.SetAttribute("MaxBytes", ns3::UintegerValue(bytes));
        bulk.SetAttribute("SendSize", ns3::UintegerValue(sendSize));
        bulk.SetAttribute("Local", ns3::AddressValue(ns3::InetSocketAddress(s.src, 0)));
        ns3::ApplicationContainer ba = bulk.Install(sn);
        sa.Start(ns3::Seconds(0.0));
        ba.Start(ns3::Seconds(0.0));
    }

    void TransferDone(uint32_t j)
    {
        XcJob& job = jobs[j];
        if (--job.pending == 0)
        {
            job.phase++;
            StartPhase(j);
        }
    }

    void MaybeEnd(uint32_t j)
    {
        XcJob& job = jobs[j];
        if (!(job.computeDone && job.commDone))
        {
            return;
        }
        double now = ns3::Simulator::Now().GetSeconds();
        job.iterations++;
        job.commSum += job.commEnd - job.commStart;
        job.stepSum += now - job.iterStart;
        BeginIteration(j);
    }

    uint32_t Iterations(uint32_t j) const { return jobs[j].iterations; }

    uint64_t ReceivedBytes() const
    {
        uint64_t s = 0;
        for (const auto& r : rx)
        {
            s += r->got;
        }
        return s;
    }

    double CommSum(uint32_t j) const { return jobs[j].commSum; }

    double StepSum(uint32_t j) const { return jobs[j].stepSum; }
};

inline void
XcRx::OnRx(ns3::Ptr<const ns3::Packet> p, const ns3::Address& from)
{
    got += p->GetSize();
    if (!done && got >= need)
    {
        done = true;
        orch->TransferDone(job);
    }
}

} // namespace ainet_xc
