//! The nodes a stream prefix names (its `node` group: SkyPilot's `head`, `worker1`). The hosts
//! of one multi-node server print different ranks (`TP0`–`TP7` on the head, `TP8`–`TP15` on
//! the worker), so their lines are the server's, one server with its ranks. Two nodes that
//! print the same rank are no such pair: they run separate servers (a job that starts one
//! replica per node), and merging them would show one replica's values as the other's. So a
//! node whose line of a rank (stats, a retraction, a KV pool) names a rank another node's
//! already did becomes its own engine
//! (`engine="worker1"`) from that line on; so does a node whose `server_args` dump says it is
//! a server of one host (`nnodes` 1) after another node's dump.
//!
//! A journal record's host (`_HOSTNAME`, see [`crate::source::writer`]) is a node the same way: the
//! hosts of a multi-node server logging under one unit name stay one server; two hosts that
//! run the unit as servers of their own part at the first rank both print. Nodes are told
//! apart per server: hosts of two units never compare their ranks.
//!
//! A journal record of a user service names its user's service manager (`user@1000`, see
//! [`crate::source::writer`]). Two users of one host never run one server, so their user units of
//! the same name never merge: the first user whose unit of that name a host logged keeps the
//! server as it is (the state keeps who that is, [`crate::state::State::first_user`], for
//! every input and across restarts); each other user's lines are an engine of it named after
//! its manager (`engine="user@1001"`), and the host is then a node of that engine as of any
//! other.
//!
//! Decided in log order, where lines are applied (the same for `--once`, following and
//! `backfill`, whatever the threads parsing).

use std::collections::HashSet;
use std::hash::{Hash, Hasher};

use crate::parse::patterns::Class;
use crate::record::{Ranks, Record};

/// Whether `name`, a journal record's `_HOSTNAME` or a stream prefix's node, is this host: its
/// host name, or the first label of either where one is a domain name (`gpu-1` and
/// `gpu-1.example.com`), compared without case.
pub fn is_this_host(name: &str) -> bool {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let me = HOST.get_or_init(|| {
        gethostname::gethostname()
            .to_string_lossy()
            .to_ascii_lowercase()
    });
    let short = |h: &str| h.split('.').next().unwrap_or("").to_string();
    let name = name.to_ascii_lowercase();
    !name.is_empty() && (name == *me || short(&name) == short(me))
}

/// Nodes told apart per source; more are each their own engine.
const MAX_NODES: usize = 64;

/// Ranks remembered per node; past it a node's new ranks are not checked.
const MAX_RANKS: usize = 4096;

#[derive(Debug, Default)]
struct Node {
    /// The server whose node it is.
    server: String,
    name: String,
    /// (hash of the engine the line has besides the node, ranks) of its rank lines.
    ranks: HashSet<(u64, Ranks)>,
    /// It printed a rank another node had: its own engine.
    own: bool,
    /// It printed a `server_args` dump.
    dumped: bool,
}

/// The nodes of one source.
#[derive(Debug, Default)]
pub struct Nodes {
    list: Vec<Node>,
    buf: String,
    /// The engine of another user's line.
    user_buf: String,
    /// The GPUs foreign prefixes named (a second GPU of one rank is a writer apart).
    gpus: super::gpus::Gpus,
}

impl Nodes {
    /// The engine of `rec`, a line of `server` on `node`: its own, after `other_user` (the
    /// service manager of a user unit another user's unit of that name on that host logged
    /// first, see [`crate::state::State::first_user`]) if any, then as [`Nodes::engine`] says
    /// for a line with a node, then as [`super::gpus::Gpus::engine`] says for a line with a
    /// GPU.
    pub fn engine_of<'s>(
        &'s mut self,
        server: &str,
        node: Option<&str>,
        other_user: Option<&str>,
        rec: &Record<'s>,
    ) -> Option<&'s str> {
        let Nodes {
            list,
            buf,
            user_buf,
            gpus,
        } = self;
        let mut engine = rec.engine;
        if let Some(u) = other_user {
            user_buf.clear();
            user_buf.push_str(u);
            if let Some(e) = rec.engine {
                user_buf.push(' ');
                user_buf.push_str(e);
            }
            let b: &'s String = user_buf;
            engine = Some(b.as_str());
        }
        let engine = match node {
            Some(n) => decide(list, buf, server, n, rec, engine),
            None => engine,
        };
        gpus.engine(server, engine, rec)
    }

    /// The engine of `rec`, a line of `node` of `server`: the line's own `engine` while the
    /// node is one of a multi-node server's, else the node after it.
    pub fn engine<'s>(&'s mut self, server: &str, node: &str, rec: &Record<'s>) -> Option<&'s str> {
        decide(&mut self.list, &mut self.buf, server, node, rec, rec.engine)
    }
}

/// [`Nodes::engine`] with the line's engine given (`engine`: the record's, or another user's).
fn decide<'s>(
    list: &mut Vec<Node>,
    buf: &'s mut String,
    server: &str,
    node: &str,
    rec: &Record<'_>,
    engine: Option<&'s str>,
) -> Option<&'s str> {
    let (class, ranks) = (rec.class, rec.ranks);
    // Kept (up to 64 per source) and part of an `engine` label: bounded as label values are.
    let node = crate::label::bounded("node", node);
    let node = &*node;
    let at = list
        .iter()
        .position(|n| n.name == node && n.server == server);
    let i = match at {
        Some(i) => i,
        None if list.len() < MAX_NODES => {
            list.push(Node {
                server: server.to_string(),
                name: node.to_string(),
                ..Node::default()
            });
            list.len() - 1
        }
        None => return own(buf, node, engine),
    };
    let peer = |j: usize, o: &Node| j != i && o.server == server && !o.own;
    if let (false, Some(a)) = (list[i].own, rec.server_args.as_deref()) {
        let others = list.iter().enumerate().any(|(j, o)| peer(j, o) && o.dumped);
        if others && a.nnodes.is_none_or(|n| n <= 1) {
            tracing::warn!(
                node,
                server,
                "a node (host) of a server starts a server of its own (server_args nnodes=1 after another node's): lines of {node} are its own engine"
            );
            list[i].own = true;
        }
        list[i].dumped = true;
    }
    // A rank's lines: its stats lines, and its retractions and startup figures when they
    // name a rank (rank-less ones are the server's, printed by every node).
    let rank_line = match class {
        Class::Prefill | Class::Decode => true,
        Class::Retract | Class::Fact => ranks != Ranks::default(),
        _ => false,
    };
    if !list[i].own && rank_line {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.unwrap_or("").hash(&mut h);
        let key = (h.finish(), ranks);
        let n = &list[i];
        if !n.ranks.contains(&key) {
            let taken = list
                .iter()
                .enumerate()
                .any(|(j, o)| peer(j, o) && o.ranks.contains(&key));
            if taken {
                tracing::warn!(
                    node,
                    server,
                    "two nodes (hosts) of one server print the same rank: they run separate servers; lines of {node} are its own engine from here on"
                );
                list[i].own = true;
            } else if n.ranks.len() < MAX_RANKS {
                list[i].ranks.insert(key);
            }
        }
    }
    if list[i].own {
        return own(buf, node, engine);
    }
    engine
}

/// `node` after the line's `engine`: the engine of a node that runs a server of its own.
fn own<'s>(buf: &'s mut String, node: &str, engine: Option<&str>) -> Option<&'s str> {
    buf.clear();
    if let Some(e) = engine {
        buf.push_str(e);
        buf.push(' ');
    }
    buf.push_str(node);
    Some(buf.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(class: Class, tp: Option<u32>, engine: Option<&str>) -> Record<'_> {
        Record {
            kind: 0,
            class,
            time: None,
            ranks: Ranks {
                tp,
                ..Ranks::default()
            },
            gpu: None,
            values: &[],
            bad_metrics: &[],
            line: "",
            unknown_text: "",
            unknown: &[],
            bad_values: 0,
            engine,
            access: None,
            server_args: None,
            listen: None,
            request: None,
        }
    }

    #[test]
    fn nodes_of_one_server_stay_one_and_a_repeated_rank_splits() {
        let mut n = Nodes::default();
        let d = |tp| line(Class::Decode, Some(tp), None);
        assert_eq!(n.engine("s", "head", &d(0)), None);
        assert_eq!(n.engine("s", "worker1", &d(8)), None);
        // Startup lines (server-wide, rank-less) of both nodes never split them.
        assert_eq!(
            n.engine("s", "worker1", &line(Class::Fact, None, None)),
            None
        );
        // A retraction of a rank the head printed: a server apart, from that line on.
        assert_eq!(
            n.engine("s", "worker3", &line(Class::Retract, Some(0), None)),
            Some("worker3")
        );
        assert_eq!(n.engine("s", "head", &d(0)), None);
        // A third node that prints TP0 again is a server of its own.
        assert_eq!(n.engine("s", "worker2", &d(0)), Some("worker2"));
        let pod = line(Class::Decode, Some(1), Some("pod/a/c"));
        assert_eq!(n.engine("s", "worker2", &pod), Some("pod/a/c worker2"));
        assert_eq!(n.engine("s", "head", &d(1)), None);
    }

    /// Hosts of two servers never compare their ranks: each server's TP0 on its own host
    /// stays unlabelled; only a second host of the same server printing TP0 parts.
    #[test]
    fn nodes_are_told_apart_per_server() {
        let mut n = Nodes::default();
        let d = |tp| line(Class::Decode, Some(tp), None);
        assert_eq!(n.engine("a", "node1", &d(0)), None);
        assert_eq!(n.engine("b", "node2", &d(0)), None);
        assert_eq!(n.engine("a", "node2", &d(0)), Some("node2"));
        assert_eq!(n.engine("b", "node2", &d(0)), None);
        assert_eq!(n.engine("b", "node1", &d(0)), Some("node1"));
    }

    /// Another user's line (hostile pass 31, H6): the engine named after its manager, before
    /// the line's own; with a host, that engine's node as any other's.
    #[test]
    fn another_users_line_is_an_engine_after_its_manager() {
        let mut n = Nodes::default();
        let d = |tp, e| line(Class::Decode, Some(tp), e);
        assert_eq!(n.engine_of("s", Some("h"), None, &d(0, None)), None);
        assert_eq!(
            n.engine_of("s", Some("h"), Some("user@1001"), &d(0, None)),
            Some("user@1001")
        );
        assert_eq!(
            n.engine_of("s", None, Some("user@1001"), &d(0, Some("c"))),
            Some("user@1001 c")
        );
        // Its TP0 on a second host: a server of its own there, as a node's.
        assert_eq!(n.engine_of("s", Some("h2"), None, &d(1, None)), None);
        assert_eq!(
            n.engine_of("s", Some("h2"), Some("user@1001"), &d(0, None)),
            Some("user@1001 h2")
        );
    }

    #[test]
    fn a_second_single_host_dump_is_a_server_apart() {
        let dump = |nnodes| {
            let mut r = line(Class::ServerArgs, None, None);
            r.server_args = Some(Box::new(crate::record::ServerArgs {
                nnodes,
                ..Default::default()
            }));
            r
        };
        let mut n = Nodes::default();
        assert_eq!(n.engine("s", "head", &dump(Some(2))), None);
        assert_eq!(n.engine("s", "worker1", &dump(Some(2))), None);
        let mut n = Nodes::default();
        assert_eq!(n.engine("s", "head", &dump(Some(1))), None);
        assert_eq!(n.engine("s", "worker1", &dump(None)), Some("worker1"));
        assert_eq!(
            n.engine("s", "worker1", &line(Class::Decode, Some(0), None)),
            Some("worker1")
        );
    }
}
