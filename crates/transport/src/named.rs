//! [`named_enum!`](crate::named_enum): the names of a closed set of choices, as written on
//! the command line and in reports.

/// Implements the names of a fieldless enum: `ALL` (every variant, in the order given, which
/// is the order of the command line's help), `from_name`, `name`, `FromStr` (its error names
/// the choices) and `Display`.
///
/// ```
/// #[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// enum Colour {
///     Red,
///     Blue,
/// }
/// spillway_transport::named_enum!(Colour, "colour", [Red => "red", Blue => "blue"]);
///
/// assert_eq!(Colour::ALL, [Colour::Red, Colour::Blue]);
/// assert_eq!("blue".parse::<Colour>(), Ok(Colour::Blue));
/// assert_eq!(Colour::Red.to_string(), "red");
/// assert_eq!(
///     "green".parse::<Colour>(),
///     Err("unknown colour 'green' (available: red, blue)".to_string())
/// );
/// ```
#[macro_export]
macro_rules! named_enum {
    ($t:ident, $what:literal, [$($v:ident => $name:literal),+ $(,)?]) => {
        impl $t {
            /// Every choice, in the order of the command line's help.
            pub const ALL: [$t; [$($name),+].len()] = [$($t::$v),+];

            /// Parses a name as written on the command line.
            pub fn from_name(name: &str) -> Option<$t> {
                match name {
                    $($name => Some($t::$v),)+
                    _ => None,
                }
            }

            /// The name used on the command line and in reports.
            pub fn name(self) -> &'static str {
                match self {
                    $($t::$v => $name,)+
                }
            }
        }

        impl ::std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<$t, String> {
                $t::from_name(s).ok_or_else(|| {
                    let names: Vec<&str> = $t::ALL.iter().map(|x| x.name()).collect();
                    format!(
                        concat!("unknown ", $what, " '{}' (available: {})"),
                        s,
                        names.join(", ")
                    )
                })
            }
        }

        impl ::std::fmt::Display for $t {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
