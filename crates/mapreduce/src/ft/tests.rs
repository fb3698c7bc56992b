//! Injections parsed and printed; buddies on the next node.

use super::*;

#[test]
fn injections_parse_and_print() {
    for s in [
        "node:2@op:3",
        "rank:0@op:1",
        "process:1@op:2",
        "process:3@op:1:shuffle",
        "process:0@op:4:keep",
        "process:2@op:2:reduce",
    ] {
        assert_eq!(s.parse::<Injection>().unwrap().to_string(), s);
    }
    for bad in [
        "node:2",
        "node:x@op:1",
        "rank:1@op:0",
        "disk:1@op:2",
        "rank:1@2",
        "process:1@op:2:later",
        "node:1@op:2:reduce",
    ] {
        assert!(bad.parse::<Injection>().is_err(), "{bad}");
    }
}

#[test]
fn buddies_are_on_the_next_node() {
    // 3 nodes of 2 members.
    let m = Members {
        global: (0..6).collect(),
        node: vec![0, 0, 1, 1, 2, 2],
    };
    assert_eq!(
        (0..6).map(|i| m.buddy(i).unwrap()).collect::<Vec<_>>(),
        [2, 3, 4, 5, 0, 1]
    );
    // Node 1 lost one member: local index 1 of node 0 wraps to node 1's only member.
    let m2 = m.without(&[3]);
    assert_eq!(m2.buddy(1), Some(2));
    assert_eq!(m2.buddy(2), Some(3));
    // One node: the next member.
    let one = Members {
        global: vec![0, 1, 2],
        node: vec![0, 0, 0],
    };
    assert_eq!(one.buddy(2), Some(0));
    assert!(coverage(&one, &[1]).is_none());
    assert!(coverage(&m, &[2, 3, 4]).is_some());
}
