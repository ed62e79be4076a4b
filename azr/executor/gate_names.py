"""The names a gated program may take from each module it is allowed to import.

The gate's allowlist is one of names, not only of modules: ``math.floor`` passes because ``floor`` is on
the list of ``math``; ``typing.sys``, ``enum.bltns``, ``json.codecs`` and ``dataclasses._thread`` do not,
although each is an attribute of an allowed module at run time. The lists were taken from each module's
``__all__`` (its public names, where it declares them) or else its public names, and then:

- no module objects: an allowed module never hands a program another module (``statistics.random``);
- no names that reach code, files or attributes by string: ``typing.get_type_hints`` and
  ``typing.ForwardRef`` evaluate strings, ``string.Formatter`` resolves attribute chains given as text,
  ``typing.IO``/``TextIO``/``BinaryIO``, ``json.load``/``json.dump`` speak to files.

The lists are written out, not computed at start-up, so that what the gate accepts does not change with
the interpreter that runs it. A submodule (``collections.abc``) is importable when it has a list here and
its root is an allowed import.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["MODULE_ATTRIBUTES"]


def _names(words: str) -> frozenset[str]:
    return frozenset(words.split())


MODULE_ATTRIBUTES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "__future__": _names(
            """
        absolute_import all_feature_names annotations barry_as_FLUFL division generator_stop
        generators nested_scopes print_function unicode_literals with_statement
        """
        ),
        "abc": _names(
            """
        ABC ABCMeta abstractclassmethod abstractmethod abstractproperty abstractstaticmethod
        get_cache_token update_abstractmethods
        """
        ),
        "bisect": _names(
            """
        bisect bisect_left bisect_right insort insort_left insort_right
        """
        ),
        "collections": _names(
            """
        ChainMap Counter OrderedDict UserDict UserList UserString defaultdict deque namedtuple
        """
        ),
        "collections.abc": _names(
            """
        AsyncGenerator AsyncIterable AsyncIterator Awaitable ByteString Callable Collection
        Container Coroutine Generator Hashable ItemsView Iterable Iterator KeysView Mapping
        MappingView MutableMapping MutableSequence MutableSet Reversible Sequence Set Sized
        ValuesView
        """
        ),
        "copy": _names(
            """
        Error copy deepcopy
        """
        ),
        "dataclasses": _names(
            """
        Field FrozenInstanceError InitVar KW_ONLY MISSING asdict astuple dataclass field fields
        is_dataclass make_dataclass replace
        """
        ),
        "decimal": _names(
            """
        BasicContext Clamped Context ConversionSyntax Decimal DecimalException DecimalTuple
        DefaultContext DivisionByZero DivisionImpossible DivisionUndefined ExtendedContext
        FloatOperation HAVE_CONTEXTVAR HAVE_THREADS Inexact InvalidContext InvalidOperation MAX_EMAX
        MAX_PREC MIN_EMIN MIN_ETINY Overflow ROUND_05UP ROUND_CEILING ROUND_DOWN ROUND_FLOOR
        ROUND_HALF_DOWN ROUND_HALF_EVEN ROUND_HALF_UP ROUND_UP Rounded Subnormal Underflow
        getcontext localcontext setcontext
        """
        ),
        "enum": _names(
            """
        CONFORM CONTINUOUS EJECT Enum EnumCheck EnumMeta EnumType Flag FlagBoundary IntEnum IntFlag
        KEEP NAMED_FLAGS ReprEnum STRICT StrEnum UNIQUE auto global_enum global_enum_repr
        global_flag_repr global_str member nonmember pickle_by_enum_name pickle_by_global_name
        property unique verify
        """
        ),
        "fractions": _names(
            """
        Fraction
        """
        ),
        "functools": _names(
            """
        WRAPPER_ASSIGNMENTS WRAPPER_UPDATES cache cached_property cmp_to_key lru_cache partial
        partialmethod reduce singledispatch singledispatchmethod total_ordering update_wrapper wraps
        """
        ),
        "heapq": _names(
            """
        heapify heappop heappush heappushpop heapreplace merge nlargest nsmallest
        """
        ),
        "itertools": _names(
            """
        accumulate chain combinations combinations_with_replacement compress count cycle dropwhile
        filterfalse groupby islice pairwise permutations product repeat starmap takewhile tee
        zip_longest
        """
        ),
        "json": _names(
            """
        JSONDecodeError JSONDecoder JSONEncoder dumps loads
        """
        ),
        "math": _names(
            """
        acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees dist e erf
        erfc exp exp2 expm1 fabs factorial floor fmod frexp fsum gamma gcd hypot inf isclose
        isfinite isinf isnan isqrt lcm ldexp lgamma log log10 log1p log2 modf nan nextafter perm pi
        pow prod radians remainder sin sinh sqrt tan tanh tau trunc ulp
        """
        ),
        "numbers": _names(
            """
        Complex Integral Number Rational Real
        """
        ),
        "operator": _names(
            """
        abs add and_ attrgetter call concat contains countOf delitem eq floordiv ge getitem gt iadd
        iand iconcat ifloordiv ilshift imatmul imod imul index indexOf inv invert ior ipow irshift
        is_ is_not isub itemgetter itruediv ixor le length_hint lshift lt matmul methodcaller mod
        mul ne neg not_ or_ pos pow rshift setitem sub truediv truth xor
        """
        ),
        "re": _names(
            """
        A ASCII DOTALL I IGNORECASE L LOCALE M MULTILINE Match NOFLAG Pattern RegexFlag S U UNICODE
        VERBOSE X compile error escape findall finditer fullmatch match purge search split sub subn
        template
        """
        ),
        "statistics": _names(
            """
        NormalDist StatisticsError correlation covariance fmean geometric_mean harmonic_mean
        linear_regression mean median median_grouped median_high median_low mode multimode pstdev
        pvariance quantiles stdev variance
        """
        ),
        "string": _names(
            """
        Template ascii_letters ascii_lowercase ascii_uppercase capwords digits hexdigits octdigits
        printable punctuation whitespace
        """
        ),
        "textwrap": _names(
            """
        TextWrapper dedent fill indent shorten wrap
        """
        ),
        "typing": _names(
            """
        AbstractSet Annotated Any AnyStr AsyncContextManager AsyncGenerator AsyncIterable
        AsyncIterator Awaitable ByteString Callable ChainMap ClassVar Collection Concatenate
        Container ContextManager Coroutine Counter DefaultDict Deque Dict Final FrozenSet Generator
        Generic Hashable ItemsView Iterable Iterator KeysView List Literal LiteralString Mapping
        MappingView Match MutableMapping MutableSequence MutableSet NamedTuple Never NewType
        NoReturn NotRequired Optional OrderedDict ParamSpec ParamSpecArgs ParamSpecKwargs Pattern
        Protocol Required Reversible Self Sequence Set Sized SupportsAbs SupportsBytes
        SupportsComplex SupportsFloat SupportsIndex SupportsInt SupportsRound TYPE_CHECKING Text
        Tuple Type TypeAlias TypeGuard TypeVar TypeVarTuple TypedDict Union Unpack ValuesView
        assert_never assert_type cast clear_overloads dataclass_transform final get_args get_origin
        get_overloads is_typeddict no_type_check no_type_check_decorator overload reveal_type
        runtime_checkable
        """
        ),
        "unicodedata": _names(
            """
        UCD bidirectional category combining decimal decomposition digit east_asian_width
        is_normalized lookup mirrored name normalize numeric ucd_3_2_0 unidata_version
        """
        ),
    }
)
"""Module name -> the attribute names a program may use on it (or import from it)."""
